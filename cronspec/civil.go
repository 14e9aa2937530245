package cronspec

// Calendar arithmetic on wall clocks without a time zone, in integers, so
// that searching fire times neither allocates nor meets DST inside
// time.Date. Algorithms from Howard Hinnant, "chrono-Compatible Low-Level
// Date Algorithms".

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// daysFromCivil returns the days since 1970-01-01 of y-m-d.
func daysFromCivil(y, m, d int) int64 {
	yy := int64(y)
	if m <= 2 {
		yy--
	}
	era := floorDiv(yy, 400)
	yoe := yy - era*400
	mp := int64((m + 9) % 12)
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// civil returns the date of the day z days after 1970-01-01.
func civil(z int64) (y, m, d int) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	m = int(mp + 3)
	if m > 12 {
		m -= 12
	}
	yy := yoe + era*400
	if m <= 2 {
		yy++
	}
	return int(yy), m, d
}

// weekday returns the day of the week (0 = Sunday) of day z since 1970-01-01,
// a Thursday.
func weekday(z int64) int {
	return int(z - floorDiv(z+4, 7)*7 + 4)
}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysIn(y, m int) int {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
