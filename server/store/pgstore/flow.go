package pgstore

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

func checkFlow(tenant, name string) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	if !schema.ValidComponent(name) {
		return fmt.Errorf("store: flow record name of %d bytes (1 to %d)", len(name), schema.MaxComponent)
	}
	return nil
}

func decodeFlow(v []byte, name string) (*storagev1.FlowRecord, error) {
	if v == nil {
		return nil, nil
	}
	rec := &storagev1.FlowRecord{}
	return rec, unmarshal(v, rec, "flow record", name)
}

func (r *reader) GetFlow(tenant, name string) (*storagev1.FlowRecord, error) {
	if err := checkFlow(tenant, name); err != nil {
		return nil, err
	}
	v, _, err := r.get("SELECT rec FROM flow WHERE tenant = $1 AND name = $2", tenant, name)
	if err != nil {
		return nil, err
	}
	return decodeFlow(v, name)
}

func (r *reader) ScanFlows(fn func(tenant, name string, rec *storagev1.FlowRecord) (bool, error)) error {
	return r.scanByTenant("flow", "name", func(tenant, name string, v []byte) (bool, error) {
		rec, err := decodeFlow(v, tenant+"/"+name)
		if err != nil || rec == nil {
			return err == nil, err
		}
		return fn(tenant, name, rec)
	})
}

// GetFlow locks the row, reading its latest committed version; what the transaction
// wrote since is answered from memory. Whether the row existed decides how PutFlow
// writes it.
func (w *writer) GetFlow(tenant, name string) (*storagev1.FlowRecord, error) {
	if err := checkFlow(tenant, name); err != nil {
		return nil, err
	}
	k := [2]string{tenant, name}
	if st, ok := w.t.flows[k]; ok {
		return decodeFlow(st.rec, name)
	}
	var v []byte
	err := w.t.run(w.c, query{sql: "SELECT rec FROM flow WHERE tenant = $1 AND name = $2 FOR UPDATE", args: []any{tenant, name},
		rows: func(rows pgx.Rows) error {
			if rows.Next() {
				return rows.Scan(&v)
			}
			return nil
		}})
	if err != nil {
		return nil, err
	}
	w.t.flows[k] = &flowState{rec: v, exists: v != nil}
	return decodeFlow(v, name)
}

func (w *writer) PutFlow(tenant, name string, rec *storagev1.FlowRecord) error {
	if _, err := w.GetFlow(tenant, name); err != nil { // locks the row, or learns there is none
		return err
	}
	st := w.t.flows[[2]string{tenant, name}]
	if rec == nil {
		if st.exists {
			w.later("DELETE FROM flow WHERE tenant = $1 AND name = $2", tenant, name)
		}
		st.rec, st.exists = nil, false
		return nil
	}
	v, err := encode(rec)
	if err != nil {
		return err
	}
	if st.exists {
		// The row is locked: the write cannot wait, and goes with the next statement.
		w.later("UPDATE flow SET rec = $3 WHERE tenant = $1 AND name = $2", tenant, name, v)
	} else {
		// No ON CONFLICT: a concurrent creator makes this fail (unique_violation), and
		// the call runs again and finds its row. Sent now, not with the COMMIT: the
		// insert waits for a concurrent creator to end, and a COMMIT must never wait on
		// a lock (it runs under the store's commit order, which the other transaction
		// may be queued behind).
		if _, err := w.exec("INSERT INTO flow (tenant, name, rec) VALUES ($1, $2, $3)", tenant, name, v); err != nil {
			return err
		}
	}
	st.rec, st.exists = v, true
	return nil
}
