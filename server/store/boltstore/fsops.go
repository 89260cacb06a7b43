package boltstore

import (
	"errors"
	"os"
	"sync/atomic"
)

// The file system operations whose order the store's durability rests on go through
// these functions, so that tests can record their sequence (fsTrace).

// fsTrace, set by tests only, is told of each operation once it succeeded.
var fsTrace atomic.Pointer[func(op, path string)]

func trace(op, path string) {
	if f := fsTrace.Load(); f != nil {
		(*f)(op, path)
	}
}

// syncDir makes the entries of dir (creations, renames, removals) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = errors.Join(d.Sync(), d.Close())
	if err == nil {
		trace("syncdir", dir)
	}
	return err
}

func fsRemove(path string) error {
	err := os.Remove(path)
	if err == nil {
		trace("remove", path)
	}
	return err
}

func fsRemoveAll(path string) error {
	err := os.RemoveAll(path)
	if err == nil {
		trace("removeall", path)
	}
	return err
}

func fsRename(from, to string) error {
	err := os.Rename(from, to)
	if err == nil {
		trace("rename", from+" -> "+to)
	}
	return err
}
