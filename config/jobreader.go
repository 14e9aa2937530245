package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// jobReader decodes and checks the entries of a jobs list in file order,
// collecting the jobs, or handing each to each, and every problem.
type jobReader struct {
	c     *collector
	o     JobsOptions
	defs  *Defaults
	each  func(*Job) // nil: keep them in jobs
	jobs  []Job
	count int
	names map[string]int // line of each name
	units int
}

func newJobReader(c *collector, o JobsOptions, defs *Defaults, n int, each func(*Job)) *jobReader {
	r := &jobReader{c: c, o: o, defs: defs, each: each, names: make(map[string]int, n)}
	if each == nil {
		r.jobs = make([]Job, 0, n)
	}
	return r
}

// add decodes and checks n, the next entry of the list.
func (r *jobReader) add(n *yaml.Node) { r.take(r.check(n)) }

// checked is one entry decoded and checked on its own.
type checked struct {
	j    Job
	d    *decoder
	line int // of the entry
}

// check decodes and checks entry n by itself: what does not depend on the
// other entries. It only reads r, so entries may be checked concurrently.
func (r *jobReader) check(n *yaml.Node) checked {
	j, d := decodeJob(n)
	if n.Kind == yaml.MappingNode {
		j.SetDefaults()
		validateJob(&j, func(field, msg string, cause error) {
			if !d.failedUnder(field) {
				d.errs = append(d.errs, &Error{Line: lineOf(d.lines, field, n.Line), Field: field, Msg: msg, Err: cause})
			}
		})
		if j.Notify == nil {
			j.Notify = r.defs.Notify.clone() // checked once, as defaults.notify
		}
		if j.Func != "" && r.o.HasFunc != nil && !r.o.HasFunc(j.Func) && !d.failedUnder("func") {
			d.errs = append(d.errs, &Error{Line: lineOf(d.lines, "func", n.Line), Field: "func", Msg: fmt.Sprintf("%q is not a function of this program: the shardcron binary registers none (func: is for programs that embed shardcron); use http or exec", j.Func)})
		}
	}
	return checked{j: j, d: d, line: n.Line}
}

// take makes the checks across entries (units, names) of the next entry
// and keeps it, or hands it over.
func (r *jobReader) take(c checked) {
	j, d := &c.j, c.d
	r.count++
	label := fmt.Sprintf("#%d", r.count)
	if j.Name != "" {
		label = fmt.Sprintf("%q", j.Name)
	}
	if r.units += max(1, j.ItemCount()); r.units > MaxUnits && r.units-max(1, j.ItemCount()) <= MaxUnits {
		field := "items"
		if len(j.ItemNames) > 0 {
			field = "item_names"
		}
		d.errs = append(d.errs, &Error{Line: lineOf(d.lines, field, c.line), Field: field, Msg: fmt.Sprintf("with this job's items the file has %d units (jobs plus items), more than the limit of %d", r.units, MaxUnits)})
	}
	if first, dup := r.names[j.Name]; dup && j.Name != "" {
		d.errs = append(d.errs, &Error{Line: lineOf(d.lines, "name", c.line), Field: "name", Msg: fmt.Sprintf("duplicate job name (first at line %d)", first)})
	} else if j.Name != "" {
		r.names[j.Name] = lineOf(d.lines, "name", c.line)
	}
	for _, e := range d.errs {
		e.Job = label
		r.c.add(e)
	}
	if r.each != nil {
		if len(d.errs) == 0 {
			r.each(j)
		}
	} else {
		r.jobs = append(r.jobs, *j)
	}
}

// result is r, or the problems found.
func (r *jobReader) result() (*jobReader, error) {
	if err := r.c.err(); err != nil {
		return nil, err
	}
	return r, nil
}
