package store

import (
	"slices"

	"google.golang.org/protobuf/encoding/protowire"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// The TaskRecord fields TaskMayMatch reads, and those of a labels map entry.
var (
	taskFieldState  = fieldNumber(&storagev1.TaskRecord{}, "state")
	taskFieldLabels = fieldNumber(&storagev1.TaskRecord{}, "labels")
	taskFieldQueue  = fieldNumber(&storagev1.TaskRecord{}, "queue")
)

const mapEntryKey, mapEntryValue = 1, 2

// filtered says whether r filters the tasks at all (States, Labels or Queue).
func (r TaskRange) filtered() bool { return len(r.States) > 0 || len(r.Labels) > 0 || r.Queue != "" }

// TaskMayMatch says whether the encoded TaskRecord v may pass r's States, Labels and
// Queue, reading only those fields and decoding nothing else: what a store's ScanTasks
// uses to step over the tasks a filtered listing would drop. It is true for a record
// it cannot parse (the full decode then reports it), and for any record when r has no
// filter.
func TaskMayMatch(v []byte, r TaskRange) bool {
	if !r.filtered() {
		return true
	}
	state := agentplanev1.TaskState_TASK_STATE_UNSPECIFIED
	queue := ""
	labels := 0
	for b := v; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return true
		}
		b = b[n:]
		switch {
		case num == taskFieldState && typ == protowire.VarintType:
			x, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return true
			}
			state = agentplanev1.TaskState(x)
		case num == taskFieldQueue && typ == protowire.BytesType:
			x, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return true
			}
			queue = string(x)
		case num == taskFieldLabels && typ == protowire.BytesType && len(r.Labels) > 0:
			entry, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return true
			}
			k, val, ok := mapEntry(entry)
			if !ok {
				return true
			}
			if want, in := r.Labels[string(k)]; in && want == string(val) {
				labels++
			}
		}
		l := protowire.ConsumeFieldValue(num, typ, b)
		if l < 0 {
			return true
		}
		b = b[l:]
	}
	if len(r.States) > 0 && !slices.Contains(r.States, state) {
		return false
	}
	if queue == "" {
		queue = DefaultQueue
	}
	if r.Queue != "" && queue != r.Queue {
		return false
	}
	return labels >= len(r.Labels)
}

// mapEntry reads the key and value of an encoded map<string, string> entry.
func mapEntry(b []byte) (k, v []byte, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, nil, false
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == mapEntryKey || num == mapEntryValue) {
			x, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return nil, nil, false
			}
			if num == mapEntryKey {
				k = x
			} else {
				v = x
			}
			b = b[l:]
			continue
		}
		l := protowire.ConsumeFieldValue(num, typ, b)
		if l < 0 {
			return nil, nil, false
		}
		b = b[l:]
	}
	return k, v, true
}
