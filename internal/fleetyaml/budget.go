package fleetyaml

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
)

// The default budget of one evaluation of a bundle's value templates for
// one cluster (ProcessValues). Value templates of real repositories
// produce kilobytes in microseconds; these leave orders of magnitude of
// room and still stop `${ repeat 2000000000 "x" }` before it allocates.
const (
	// DefaultTemplateOutput bounds the text the templates write: the
	// rendered values document, a few KiB in practice.
	DefaultTemplateOutput int64 = 4 << 20
	// DefaultTemplateAlloc bounds the strings and lists template
	// functions make, all calls together.
	DefaultTemplateAlloc int64 = 64 << 20
	// DefaultTemplateTime bounds the evaluation's wall time.
	DefaultTemplateTime = 2 * time.Second
	// maxTemplateCalls bounds how many times named templates (define,
	// template, block) are entered: recursion ends here, long before
	// text/template's own depth limit of 100,000 frames.
	maxTemplateCalls = 1000
)

// budgetCheckFunc is the function the evaluator calls at the start of
// every range iteration and named template, where text/template offers
// no other hook.
const budgetCheckFunc = "flotillaBudgetCheck"

// TemplateBudgetError reports value templates that went over their
// budget. It is the repository's content at fault: Class is
// outcome.Invalid and retrying cannot help.
type TemplateBudgetError struct {
	// Resource is what ran out: "output", "memory", "time" or "template
	// calls".
	Resource string
	// Limit describes the budget ("4 MiB", "2s").
	Limit string
}

func (e *TemplateBudgetError) Error() string {
	return fmt.Sprintf("template exceeds its %s budget of %s", e.Resource, e.Limit)
}

// Class is outcome.Invalid: the bundle must change.
func (e *TemplateBudgetError) Class() outcome.Class { return outcome.Invalid }

// budget is the state of one ProcessValues evaluation: what was written
// and made so far, its deadline and the first budget error.
type budget struct {
	deadline       time.Time
	written, alloc int64
	calls          int
	err            *TemplateBudgetError
}

// templateTime is the time budget: DefaultTemplateTime. Tests of the other
// budgets raise it (export_test.go): it is wall-clock, and a loaded test
// machine must not make them run out of time first.
var templateTime = DefaultTemplateTime

func newBudget() *budget {
	return &budget{deadline: time.Now().Add(templateTime)}
}

// fail records e as the evaluation's error and panics with it:
// text/template turns a panic in a function into an execution error.
func (b *budget) fail(e *TemplateBudgetError) {
	if b.err == nil {
		b.err = e
	}
	panic(b.err)
}

func (b *budget) checkTime() {
	if b.err != nil {
		panic(b.err)
	}
	if time.Now().After(b.deadline) {
		b.fail(&TemplateBudgetError{Resource: "time", Limit: templateTime.String()})
	}
}

// need fails when n more bytes would not fit the memory budget; it does
// not count them (charge does, once they exist).
func (b *budget) need(n int64) {
	if n < 0 || n > DefaultTemplateAlloc-b.alloc {
		b.fail(&TemplateBudgetError{Resource: "memory", Limit: mib(DefaultTemplateAlloc)})
	}
}

func (b *budget) charge(v reflect.Value) {
	var n int64
	switch v.Kind() {
	case reflect.String, reflect.Slice, reflect.Array:
		n = int64(v.Len())
		if v.Kind() != reflect.String && v.Type().Elem().Kind() != reflect.Uint8 {
			n *= 16 // an element is at least a word; an interface, two
		}
	default:
		return
	}
	b.need(n)
	b.alloc += n
}

// step is budgetCheckFunc: a range iteration or a named template starts.
func (b *budget) step(call bool) string {
	b.checkTime()
	if call {
		if b.calls++; b.calls > maxTemplateCalls {
			b.fail(&TemplateBudgetError{Resource: "template calls", Limit: fmt.Sprint(maxTemplateCalls)})
		}
	}
	return ""
}

// Write counts output; it fails once the output budget is spent.
func (b *budget) Write(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if time.Now().After(b.deadline) {
		b.err = &TemplateBudgetError{Resource: "time", Limit: templateTime.String()}
		return 0, b.err
	}
	if int64(len(p)) > DefaultTemplateOutput-b.written {
		b.err = &TemplateBudgetError{Resource: "output", Limit: mib(DefaultTemplateOutput)}
		return 0, b.err
	}
	b.written += int64(len(p))
	return len(p), nil
}

// funcs returns the function map with every function bounded by b: each
// call checks the deadline, functions that make output larger than their
// input (repeat, indent, until, ...) check the memory budget before they
// run, and what every call returns counts against it.
func (b *budget) funcs(base template.FuncMap) template.FuncMap {
	out := make(template.FuncMap, len(base)+2)
	for name, fn := range base {
		out[name] = b.wrap(fn, sizeBefore[name])
	}
	out["printf"] = b.wrap(fmt.Sprintf, printfSize)
	out[budgetCheckFunc] = b.step
	return out
}

func (b *budget) wrap(fn any, size func(args []reflect.Value) int64) any {
	v := reflect.ValueOf(fn)
	return reflect.MakeFunc(v.Type(), func(args []reflect.Value) []reflect.Value {
		b.checkTime()
		if size != nil {
			b.need(size(args))
		}
		var out []reflect.Value
		if v.Type().IsVariadic() {
			out = v.CallSlice(args)
		} else {
			out = v.Call(args)
		}
		if len(out) > 0 {
			b.charge(out[0])
		}
		return out
	}).Interface()
}

// sizeBefore estimates, from their arguments, the size of the results of
// the functions that can make far more than they are given, so that the
// budget refuses them before they allocate.
var sizeBefore = map[string]func(args []reflect.Value) int64{
	"repeat":       func(a []reflect.Value) int64 { return mul(a[0].Int(), int64(a[1].Len())) },
	"indent":       indentSize,
	"nindent":      indentSize,
	"until":        func(a []reflect.Value) int64 { return mul(abs(a[0].Int()), 16) },
	"untilStep":    untilStepSize,
	"seq":          seqSize,
	"randAlphaNum": countArg,
	"randAlpha":    countArg,
	"randAscii":    countArg,
	"randNumeric":  countArg,
	"randBytes":    func(a []reflect.Value) int64 { return mul(abs(a[0].Int()), 3) },
	"replace":      replaceSize,
	"wrapWith": func(a []reflect.Value) int64 {
		return mul(int64(a[2].Len())/max(a[0].Int(), 1)+1, int64(a[1].Len())) + int64(a[2].Len())
	},
	"join":                       joinSize,
	"regexReplaceAll":            regexReplaceSize,
	"mustRegexReplaceAll":        regexReplaceSize,
	"regexReplaceAllLiteral":     regexReplaceSize,
	"mustRegexReplaceAllLiteral": regexReplaceSize,
}

// mul multiplies non-negative sizes, saturating instead of overflowing.
func mul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

func countArg(a []reflect.Value) int64 { return abs(a[0].Int()) }

func indentSize(a []reflect.Value) int64 {
	s := a[1].String()
	return mul(a[0].Int(), int64(strings.Count(s, "\n")+2)) + int64(len(s))
}

func untilStepSize(a []reflect.Value) int64 {
	start, stop, step := a[0].Int(), a[1].Int(), abs(a[2].Int())
	return mul(abs(stop-start)/max(step, 1)+1, 16)
}

// seqSize bounds seq's output: at most 21 bytes per number.
func seqSize(a []reflect.Value) int64 {
	p := a[0] // the variadic ...int, as a slice
	if p.Len() == 0 {
		return 0
	}
	start, end, step := int64(1), p.Index(p.Len()-1).Int(), int64(1)
	if p.Len() >= 2 {
		start = p.Index(0).Int()
	}
	if p.Len() == 3 {
		step = max(abs(p.Index(1).Int()), 1)
	}
	return mul(abs(end-start)/step+1, 21)
}

func replaceSize(a []reflect.Value) int64 {
	old, repl, src := a[0].String(), a[1].String(), a[2].String()
	n := int64(len(src) + 1)
	if old != "" {
		n = int64(strings.Count(src, old))
	}
	return mul(n, int64(len(repl))) + int64(len(src))
}

// regexReplaceSize assumes the worst: a match at every position.
func regexReplaceSize(a []reflect.Value) int64 {
	s, repl := a[1].String(), a[2].String()
	return mul(int64(len(s)+1), int64(len(repl))) + int64(len(s))
}

func joinSize(a []reflect.Value) int64 {
	v := reflect.Indirect(a[1])
	for v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Slice && v.Kind() != reflect.Array {
		return 0
	}
	n := mul(int64(v.Len()), int64(a[0].Len()))
	for i := range v.Len() {
		e := v.Index(i)
		for e.Kind() == reflect.Interface && !e.IsNil() {
			e = e.Elem()
		}
		if e.Kind() == reflect.String {
			n += int64(e.Len())
		}
	}
	return n
}

// printfSize bounds fmt.Sprintf's output: the format, every width and
// precision in it, and the arguments' own sizes.
func printfSize(a []reflect.Value) int64 {
	format := a[0].String()
	n := int64(len(format))
	num := int64(0)
	for i := 0; i < len(format); i++ {
		if c := format[i]; c >= '0' && c <= '9' {
			num = min(num*10+int64(c-'0'), math.MaxInt32)
			continue
		}
		n += num
		num = 0
	}
	n += num
	args := a[1]
	for i := range args.Len() {
		e := args.Index(i)
		for e.Kind() == reflect.Interface && !e.IsNil() {
			e = e.Elem()
		}
		n += 32
		if e.Kind() == reflect.String {
			n += int64(e.Len())
		}
	}
	return n
}

// addChecks makes every range iteration and every named template of t
// call budgetCheckFunc first. check is a parsed `${ flotillaBudgetCheck }`
// action.
func addChecks(t *template.Template, iterate, call parse.Node) {
	for _, tt := range t.Templates() {
		if tt.Tree == nil || tt.Root == nil {
			continue
		}
		addRangeChecks(tt.Root, iterate)
		tt.Root.Nodes = append([]parse.Node{call}, tt.Root.Nodes...)
	}
}

func addRangeChecks(list *parse.ListNode, check parse.Node) {
	if list == nil {
		return
	}
	for _, n := range list.Nodes {
		switch n := n.(type) {
		case *parse.RangeNode:
			addRangeChecks(n.List, check)
			addRangeChecks(n.ElseList, check)
			n.List.Nodes = append([]parse.Node{check}, n.List.Nodes...)
		case *parse.IfNode:
			addRangeChecks(n.List, check)
			addRangeChecks(n.ElseList, check)
		case *parse.WithNode:
			addRangeChecks(n.List, check)
			addRangeChecks(n.ElseList, check)
		case *parse.ListNode:
			addRangeChecks(n, check)
		}
	}
}

// mib writes a budget of whole MiB.
func mib(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }
