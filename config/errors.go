package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Errors wrapped by every *Error and by Expand, checked with errors.Is.
var (
	// ErrInvalid: a jobs file, a job or node settings failed validation.
	ErrInvalid = errors.New("config: invalid")
	// ErrVariableNotAllowed: ${NAME} names a variable outside SHARDCRON_JOB_*.
	ErrVariableNotAllowed = errors.New("config: variable not allowed")
	// ErrVariableUnset: ${SHARDCRON_JOB_...} is not set where the job runs.
	ErrVariableUnset = errors.New("config: variable not set")
	// ErrVariableSyntax: a ${ is not closed or does not hold a variable name.
	ErrVariableSyntax = errors.New("config: bad variable reference")
)

// MaxErrors bounds how many problems one parse reports; a 1,000,000-job file
// with the same mistake everywhere would otherwise print a million lines.
const MaxErrors = 1000

// Error is one problem, located as precisely as the input allows:
//
//	jobs.yaml:12: job "invoice-sweep": field "misfire": must be one of skip, run_once, run_all
type Error struct {
	File  string // file name as given; "" when not read from a file
	Line  int    // 1-based; 0 when unknown
	Job   string // `"name"` or `#3` (1-based position) for jobs; "" otherwise
	Field string // dotted path such as "http.method"; "" for the entry or file as a whole
	Msg   string
	Err   error // underlying cause (such as schedule.ErrNeverFires), or nil
}

func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		fmt.Fprintf(&b, "%s: ", e.File)
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Job != "" {
		fmt.Fprintf(&b, "job %s: ", e.Job)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, "field %q: ", e.Field)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap lets errors.Is find ErrInvalid and the underlying cause.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

// Errors is every problem found in one input, in file order, one per line
// when printed. Parsing never stops at the first problem.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.Is and errors.As look at each problem.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// collector gathers the problems of one parse.
type collector struct {
	file    string
	errs    Errors
	dropped int
}

func (c *collector) add(e *Error) {
	if len(c.errs) >= MaxErrors {
		c.dropped++
		return
	}
	e.File = c.file
	c.errs = append(c.errs, e)
}

func (c *collector) addf(line int, field, format string, args ...any) {
	c.add(&Error{Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// err returns the problems sorted by line (stable, so those of one line keep
// the order they were found in), or nil.
func (c *collector) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(c.errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	out := c.errs
	if c.dropped > 0 {
		out = append(out, &Error{File: c.file, Msg: fmt.Sprintf("%d more problems not shown (at most %d are listed)", c.dropped, MaxErrors)})
	}
	return out
}
