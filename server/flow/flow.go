// Package flow holds the pieces of lease-time flow control (docs/api.md#flow-control)
// that both the configuration and the task domain need: the CEL environment that
// computes a task's concurrency or rate key, and the token bucket.
package flow

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/ext"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// Bounds on a key expression and its value.
const (
	// MaxExpressionBytes bounds a key expression's source.
	MaxExpressionBytes = 1024
	// MaxKeyBytes bounds a computed key.
	MaxKeyBytes = 128
	// MaxInputChars is how much of the task's input text the expression sees.
	MaxInputChars = 4096
	// evalCostLimit bounds the work of one evaluation (CEL cost units).
	evalCostLimit = 10_000
)

// env is the CEL environment of key expressions: the task's tenant, queue, labels and
// the text of its input message.
var env = func() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable("tenant", cel.StringType),
		cel.Variable("queue", cel.StringType),
		cel.Variable("labels", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("input", cel.StringType),
		ext.Strings(),
		cel.ParserExpressionSizeLimit(MaxExpressionBytes),
		cel.ParserRecursionLimit(32),
	)
	if err != nil {
		panic("flow: building the CEL environment: " + err.Error())
	}
	return e
}()

// Key is a compiled key expression.
type Key struct {
	prg  cel.Program
	expr string
}

// CompileKey compiles a key expression, which must have type string. The error
// names the line and column of each problem.
func CompileKey(expr string) (*Key, error) {
	switch {
	case strings.TrimSpace(expr) == "":
		return nil, fmt.Errorf("the expression is empty")
	case len(expr) > MaxExpressionBytes:
		return nil, fmt.Errorf("the expression is %d bytes, at most %d allowed", len(expr), MaxExpressionBytes)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		var msgs []string
		for _, e := range iss.Errors() {
			msgs = append(msgs, fmt.Sprintf("%d:%d: %s", e.Location.Line(), e.Location.Column()+1, e.Message))
		}
		return nil, fmt.Errorf("%s", strings.Join(msgs, "; "))
	}
	if out := ast.OutputType(); !out.IsExactType(types.StringType) {
		return nil, fmt.Errorf("the expression has type %s; it must be string (for example labels[\"customer\"], or string(...))", out)
	}
	prg, err := env.Program(ast, cel.CostLimit(evalCostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, err
	}
	return &Key{prg: prg, expr: expr}, nil
}

// Cache compiles the key expressions tasks name themselves
// (StartTaskRequest.concurrency.key), each once: at most maxCached are kept, and a
// full cache starts over. An expression that does not compile is not kept.
type Cache struct {
	mu   sync.Mutex
	keys map[string]*Key
}

const maxCached = 1024

// Compile is CompileKey through the cache.
func (c *Cache) Compile(expr string) (*Key, error) {
	c.mu.Lock()
	k := c.keys[expr]
	c.mu.Unlock()
	if k != nil {
		return k, nil
	}
	k, err := CompileKey(expr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.keys == nil || len(c.keys) >= maxCached {
		c.keys = map[string]*Key{}
	}
	c.keys[expr] = k
	c.mu.Unlock()
	return k, nil
}

// String is the expression's source.
func (k *Key) String() string { return k.expr }

// Task is what a key expression sees of a task being started.
type Task struct {
	Tenant, Queue string
	Labels        map[string]string
	Input         *agentplanev1.Message
}

// Eval computes the key of a task; "" means the task is not limited by this policy.
// An evaluation error (a label the expression indexes is missing) or a key over
// MaxKeyBytes is an error, which refuses the start.
func (k *Key) Eval(ctx context.Context, t Task) (string, error) {
	labels := t.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	out, _, err := k.prg.ContextEval(ctx, map[string]any{
		"tenant": t.Tenant, "queue": t.Queue, "labels": labels, "input": InputText(t.Input),
	})
	if err != nil {
		return "", fmt.Errorf("%s: %v", k.expr, err)
	}
	s, ok := out.Value().(string)
	if !ok {
		return "", fmt.Errorf("%s: evaluated to %T, not a string", k.expr, out.Value())
	}
	if len(s) > MaxKeyBytes {
		return "", fmt.Errorf("%s: the key is %d bytes, at most %d allowed", k.expr, len(s), MaxKeyBytes)
	}
	return s, nil
}

// InputText is the text parts of a message, joined by newlines, up to MaxInputChars
// bytes.
func InputText(m *agentplanev1.Message) string {
	var b strings.Builder
	for _, p := range m.GetParts() {
		if t := p.GetText(); t != "" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(t)
			if b.Len() >= MaxInputChars {
				break
			}
		}
	}
	s := b.String()
	if len(s) > MaxInputChars {
		s = strings.ToValidUTF8(s[:MaxInputChars], "")
	}
	return s
}

// Bucket is a token bucket: Rate tokens a second, holding at most Burst.
type Bucket struct {
	Rate  float64
	Burst float64
}

// Take takes one token from the bucket's state rec (nil: a full bucket, never used)
// at now, and returns the state to store. When the bucket is empty it takes nothing
// and says how long until it holds a token. A refill time after now (another
// replica's clock ahead) adds nothing and is kept, so that time never runs backwards.
func (b Bucket) Take(rec *storagev1.FlowRecord, now time.Time) (next *storagev1.FlowRecord, ok bool, wait time.Duration) {
	tokens, last := b.Burst, now
	if rec != nil && rec.GetRefillTime() != nil {
		tokens, last = rec.GetTokens(), rec.GetRefillTime().AsTime()
		if now.After(last) {
			tokens = math.Min(b.Burst, tokens+now.Sub(last).Seconds()*b.Rate)
			last = now
		}
	}
	if tokens >= 1 {
		return &storagev1.FlowRecord{Tokens: tokens - 1, RefillTime: timestamppb.New(last)}, true, 0
	}
	wait = time.Duration(math.Ceil((1 - tokens) / b.Rate * float64(time.Second)))
	if last.After(now) {
		wait += last.Sub(now)
	}
	return &storagev1.FlowRecord{Tokens: tokens, RefillTime: timestamppb.New(last)}, false, wait
}
