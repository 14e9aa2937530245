package cronspec

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
)

// hField is one cron field as H sees it: its name, the values H picks from
// by default, and the bounds an explicit H(a-b) range must stay within.
type hField struct {
	name         string
	lo, hi       int // H alone picks from lo..hi
	minLo, maxHi int // H(a-b) needs minLo <= a <= b <= maxHi
}

// hFields are the six fields, seconds first. H in the day of month picks
// from 1-28 so that the job runs in every month, as Jenkins does.
var hFields = [6]hField{
	{name: "second", lo: 0, hi: 59, minLo: 0, maxHi: 59},
	{name: "minute", lo: 0, hi: 59, minLo: 0, maxHi: 59},
	{name: "hour", lo: 0, hi: 23, minLo: 0, maxHi: 23},
	{name: "day of month", lo: 1, hi: 28, minLo: 1, maxHi: 31},
	{name: "month", lo: 1, hi: 12, minLo: 1, maxHi: 12},
	{name: "day of week", lo: 0, hi: 6, minLo: 0, maxHi: 6},
}

// HashOffset returns the value H picks for job name in field (0 = second
// ... 5 = day of week) out of n values: xxhash64 of the name, a zero byte
// and the field's name, modulo n. It is part of the public contract: the
// same on every replica, across restarts and across releases.
func HashOffset(name string, field, n int) int {
	if n <= 0 || field < 0 || field >= len(hFields) {
		return 0
	}
	return int(xxhash.Sum64String(name+"\x00"+hFields[field].name) % uint64(n))
}

// Hashed reports whether spec uses H in any field (an H, H(a-b), H/n or
// H(a-b)/n term; day names such as THU are not H).
func Hashed(spec string) bool {
	for _, f := range strings.Fields(spec) {
		for _, part := range strings.Split(f, ",") {
			if isHTerm(part) {
				return true
			}
		}
	}
	return false
}

func isHTerm(part string) bool {
	return part == "H" || strings.HasPrefix(part, "H(") || strings.HasPrefix(part, "H/")
}

// Expand returns spec with every H term replaced by the job's own values:
// H becomes one value, H(a-b) one value in a..b, H/n the steps of n from an
// offset below n, and H(a-b)/n the steps of n through a..b from a plus an
// offset below n. A spec without H comes back unchanged. H needs a job
// name; a bad term is an ErrSpec naming the field.
func Expand(spec, name string) (string, error) {
	spec = strings.TrimSpace(spec)
	if !Hashed(spec) {
		return spec, nil
	}
	if strings.HasPrefix(spec, "@") {
		return spec, nil // descriptors have no fields; the parser rejects the rest
	}
	if name == "" {
		return "", fmt.Errorf("%w %q: H needs the job's name", ErrSpec, spec)
	}
	fields := strings.Fields(spec)
	first := 0 // index in hFields of fields[0]
	switch len(fields) {
	case 6:
	case 5:
		first = 1 // no seconds field: the job fires on second 0
	default:
		return spec, nil // the parser reports the field count
	}
	for i, f := range fields {
		fi := first + i
		parts := strings.Split(f, ",")
		for k, part := range parts {
			if !isHTerm(part) {
				continue
			}
			v, err := expandTerm(part, fi, name)
			if err != nil {
				return "", fmt.Errorf("%w %q: %s field %q: %v", ErrSpec, spec, hFields[fi].name, f, err)
			}
			parts[k] = v
		}
		fields[i] = strings.Join(parts, ",")
	}
	return strings.Join(fields, " "), nil
}

// expandTerm resolves one H term of field fi for job name.
func expandTerm(term string, fi int, name string) (string, error) {
	hf := hFields[fi]
	lo, hi := hf.lo, hf.hi
	rest := term[1:]
	if strings.HasPrefix(rest, "(") {
		end := strings.IndexByte(rest, ')')
		if end < 0 {
			return "", fmt.Errorf("H( without a closing parenthesis")
		}
		a, b, ok := strings.Cut(rest[1:end], "-")
		var errA, errB error
		lo, errA = strconv.Atoi(a)
		hi, errB = strconv.Atoi(b)
		if !ok || errA != nil || errB != nil {
			return "", fmt.Errorf("want H(a-b) with whole numbers a and b, such as H(%d-%d)", hf.minLo, hf.maxHi)
		}
		if lo < hf.minLo || hi > hf.maxHi || lo > hi {
			return "", fmt.Errorf("H(%d-%d) must lie within %d-%d, low end first", lo, hi, hf.minLo, hf.maxHi)
		}
		rest = rest[end+1:]
	}
	width := hi - lo + 1
	if rest == "" {
		return strconv.Itoa(lo + HashOffset(name, fi, width)), nil
	}
	step, ok := strings.CutPrefix(rest, "/")
	if !ok {
		return "", fmt.Errorf("unexpected %q after H (want H, H(a-b), H/n or H(a-b)/n)", rest)
	}
	n, err := strconv.Atoi(step)
	if err != nil || n < 1 || n > width {
		return "", fmt.Errorf("the step of H/%s must be a whole number from 1 to %d", step, width)
	}
	return fmt.Sprintf("%d-%d/%d", lo+HashOffset(name, fi, n), hi, n), nil
}

// ParseJob parses the schedule of the job called name: Parse after Expand,
// so H fields take the job's own stable offset. Parse itself refuses H.
func ParseJob(spec, tz, name string) (Schedule, error) {
	expanded, err := Expand(spec, name)
	if err != nil {
		return nil, err
	}
	s, err := Parse(expanded, tz)
	if err != nil && expanded != strings.TrimSpace(spec) {
		return nil, fmt.Errorf("%w (%q with H resolved for job %q)", err, spec, name)
	}
	return s, err
}

// NextN returns the next n fire times of s strictly after t (fewer when the
// schedule runs out within its horizon).
func NextN(s Schedule, t time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for range n {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}
