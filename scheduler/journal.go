package scheduler

// The completion journal (docs/design.md "The completion journal"): lines
// naming runs that ended, written by their owner, one value for many shards,
// before the completions reach the runs' records. A successor that finds a
// flight of its record named there does not run it again: the run ended, and
// only its record write was still to come. This release reads the journal;
// it writes none (the next release does, once every replica reads it), so
// a rolling upgrade never has a successor that cannot read what its
// predecessor wrote.

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// JournalFormat is the journal format this release reads; replicas
// announce it in their member value, so that a writer can tell when every
// possible successor reads what it writes.
const JournalFormat = 1

// journalHeader starts every journal value: its format, so that a later
// release's value is refused rather than misread.
const journalHeader = "shardcron-journal 1\n"

// JournalLine names one ended run: the job (unit) of a shard, the tick it
// ran and the token that claimed it, i.e. the flight its completion removes.
type JournalLine struct {
	Shard int
	Token int64
	Tick  time.Time
	Job   string
}

// Completion is a run ended under Token at Tick, as a journal names it.
type Completion struct {
	Tick  time.Time
	Token int64
}

// AppendJournal appends the journal value holding lines to b: the header,
// then one line a run, "<shard> <token> <tick, Unix nanoseconds> <job>".
// No job name holds a space or a newline (config).
func AppendJournal(b []byte, lines []JournalLine) []byte {
	b = append(b, journalHeader...)
	for _, l := range lines {
		b = strconv.AppendInt(b, int64(l.Shard), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, l.Token, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, l.Tick.UnixNano(), 10)
		b = append(b, ' ')
		b = append(b, l.Job...)
		b = append(b, '\n')
	}
	return b
}

// ErrJournalFormat is a journal value of another format than this release
// reads.
var ErrJournalFormat = errors.New("scheduler: journal value in an unknown format")

// DecodeJournal reads a journal value. Any malformed line refuses the whole
// value: a value no writer produced says nothing reliable about any run.
func DecodeJournal(b []byte) ([]JournalLine, error) {
	rest, ok := bytes.CutPrefix(b, []byte(journalHeader))
	if !ok {
		return nil, ErrJournalFormat
	}
	var out []JournalLine
	for n := 2; len(rest) > 0; n++ {
		line, after, found := bytes.Cut(rest, []byte{'\n'})
		if !found {
			return nil, fmt.Errorf("scheduler: journal line %d: not terminated", n)
		}
		rest = after
		l, err := journalLine(line)
		if err != nil {
			return nil, fmt.Errorf("scheduler: journal line %d: %w", n, err)
		}
		out = append(out, l)
	}
	return out, nil
}

func journalLine(line []byte) (JournalLine, error) {
	f := bytes.SplitN(line, []byte{' '}, 4)
	if len(f) != 4 || len(f[3]) == 0 || bytes.ContainsAny(f[3], " \r\t") {
		return JournalLine{}, errors.New("want <shard> <token> <tick> <job>")
	}
	shard, err := strconv.Atoi(string(f[0]))
	if err != nil || shard < 0 {
		return JournalLine{}, fmt.Errorf("shard %q", f[0])
	}
	token, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil || token <= 0 {
		return JournalLine{}, fmt.Errorf("token %q", f[1])
	}
	ns, err := strconv.ParseInt(string(f[2]), 10, 64)
	if err != nil {
		return JournalLine{}, fmt.Errorf("tick %q", f[2])
	}
	return JournalLine{Shard: shard, Token: token, Tick: time.Unix(0, ns).UTC(), Job: string(f[3])}, nil
}

// journaled reports whether the journal read with rec's shard names f as
// ended: its completion is durable there, not yet in the record.
func (rec *jobRec) journaled(f Flight) bool {
	return slices.ContainsFunc(rec.sh.done[rec.e.name], func(c Completion) bool {
		return c.Token == f.Token && c.Tick.Equal(f.Tick)
	})
}
