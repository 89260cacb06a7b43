package pgstore

import (
	"fmt"
	"strings"
)

// Plain one-row INSERTs of the tables a StartTask writes go to the server merged: the
// rows of one table among the pending writes become one statement, INSERT ... SELECT
// FROM unnest of one array per column, whose text does not depend on the number of rows
// (one prepared statement). A batch of 64 StartTasks sends 4 inserts instead of 256.
//
// A row moves up to its table's first row among the pending writes, past inserts of
// other tables only: merging stops at any other statement (an update, a delete, a
// read), and the store's tables have no foreign keys or triggers that would order
// inserts of different tables. A merged statement that the database refuses has more
// than one owner to blame: the batch runs again without merging (call.unmerged), and
// the statement that fails then is its owner's.

// insertTable is a table whose one-row inserts may be merged.
type insertTable struct {
	one   string   // the one-row INSERT, $1 to $n
	many  string   // the same from unnest($1::type[], ...)
	types []string // the columns' SQL types, for many and for the arrays' Go types
}

func newInsertTable(table string, cols ...string) *insertTable {
	t := &insertTable{}
	var names, ones, arrays []string
	for i, c := range cols {
		name, typ, _ := strings.Cut(c, " ")
		names, t.types = append(names, name), append(t.types, typ)
		ones = append(ones, fmt.Sprintf("$%d", i+1))
		arrays = append(arrays, fmt.Sprintf("$%d::%s[]", i+1, typ))
	}
	head := "INSERT INTO " + table + " (" + strings.Join(names, ", ") + ") "
	t.one = head + "VALUES (" + strings.Join(ones, ", ") + ")"
	t.many = head + "SELECT * FROM unnest(" + strings.Join(arrays, ", ") + ")"
	return t
}

var (
	insertRequest = newInsertTable("requests", "tenant text", "request_id text", "task_id text")
	insertTask    = newInsertTable("tasks", "tenant text", "task_id text", "state int", "queue text", "create_key bytea",
		"queue_key bytea", "lease_key bytea", "ended_key bytea", "rec bytea")
	insertSpec  = newInsertTable("task_specs", "tenant text", "task_id text", "spec bytea")
	insertEvent = newInsertTable("events", "tenant text", "task_id text", "seq bigint", "rec bytea")
)

// maxMergedRows bounds one merged statement.
const maxMergedRows = 1024

// merge returns ps with the rows of each table's run of one-row inserts merged (see
// above).
func merge(ps []stmt) []stmt {
	type group struct {
		at   int
		rows []stmt
	}
	out := make([]stmt, 0, len(ps))
	var groups []*group
	open := map[*insertTable]*group{}
	for _, p := range ps {
		if p.ins == nil {
			clear(open)
			out = append(out, p)
			continue
		}
		if g := open[p.ins]; g != nil && len(g.rows) < maxMergedRows {
			g.rows = append(g.rows, p)
			continue
		}
		g := &group{at: len(out), rows: []stmt{p}}
		open[p.ins], groups = g, append(groups, g)
		out = append(out, p)
	}
	for _, g := range groups {
		if len(g.rows) > 1 {
			out[g.at] = merged(g.rows)
		}
	}
	return out
}

// merged is rows (of one table) as one statement.
func merged(rows []stmt) stmt {
	t := rows[0].ins
	cols := make([]any, len(t.types))
	for i, typ := range t.types {
		switch typ {
		case "text":
			cols[i] = column[string](rows, i)
		case "int":
			cols[i] = column[int32](rows, i)
		case "bigint":
			cols[i] = column[int64](rows, i)
		case "bytea":
			cols[i] = column[[]byte](rows, i)
		default:
			panic("pgstore: no merge for column type " + typ)
		}
	}
	s := stmt{sql: t.many, args: cols, owner: rows[0].owner, merged: true}
	for _, r := range rows[1:] {
		if r.owner != s.owner {
			s.owner = nil
		}
	}
	return s
}

// column is argument i of each of rows, as the array merged sends for its column.
func column[T any](rows []stmt, i int) []T {
	col := make([]T, len(rows))
	for j, r := range rows {
		col[j] = r.args[i].(T)
	}
	return col
}
