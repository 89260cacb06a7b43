package pgstore

import (
	"fmt"
	"testing"
)

// TestMergeOneStatementPerTable: a batch of 64 StartTasks' one-row inserts (request,
// task, spec, event each) goes as BEGIN and 4 statements, one per table, each carrying
// the 64 rows in the calls' order; a statement of another kind ends the runs, so rows
// after it are not moved before it.
func TestMergeOneStatementPerTable(t *testing.T) {
	ps := []stmt{{sql: beginSQL}}
	for i := range 64 {
		c := &call{}
		id := fmt.Sprintf("t%02d", i)
		ps = append(ps,
			stmt{sql: insertRequest.one, args: []any{"acme", id, id}, owner: c, ins: insertRequest},
			stmt{sql: insertTask.one, args: []any{"acme", id, int32(1), "q", []byte("c"), []byte("q"), []byte(nil), []byte(nil), []byte("rec")}, owner: c, ins: insertTask},
			stmt{sql: insertSpec.one, args: []any{"acme", id, []byte("spec")}, owner: c, ins: insertSpec},
			stmt{sql: insertEvent.one, args: []any{"acme", id, int64(1), []byte("ev")}, owner: c, ins: insertEvent})
	}
	out := merge(ps)
	if len(out) != 5 {
		t.Fatalf("64 StartTasks' inserts went as %d statements, want BEGIN and 4", len(out))
	}
	for i, table := range []*insertTable{insertRequest, insertTask, insertSpec, insertEvent} {
		s := out[i+1]
		if s.sql != table.many || !s.merged || s.owner != nil {
			t.Fatalf("statement %d = %q (merged %v, owner %v), want %q of several calls", i+1, s.sql, s.merged, s.owner, table.many)
		}
		ids := s.args[1].([]string)
		if len(ids) != 64 || ids[0] != "t00" || ids[63] != "t63" {
			t.Fatalf("statement %d carries ids %q, want t00 to t63 in order", i+1, ids)
		}
	}

	// An update between two inserts of one table: three statements, in that order.
	c := &call{}
	ps = []stmt{
		{sql: insertEvent.one, args: []any{"acme", "a", int64(1), []byte("ev")}, owner: c, ins: insertEvent},
		{sql: "UPDATE tasks SET rec = $1", owner: c},
		{sql: insertEvent.one, args: []any{"acme", "b", int64(1), []byte("ev")}, owner: c, ins: insertEvent},
	}
	if out := merge(ps); len(out) != 3 || out[0].merged || out[1].sql != ps[1].sql || out[2].merged {
		t.Fatalf("inserts around an update merged into %d statements: %+v", len(out), out)
	}
}
