package report

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// The charts are inline SVG drawn from a Report: stacked bars per time
// bucket (a day, a week or a month, whichever keeps the bars readable),
// with each bar's records named in its tooltip. Geometry is computed here;
// the template only places it.

type chart struct {
	ID, Title, Caption string
	W, H               int
	PlotX, PlotY       float64
	PlotW, PlotH       float64
	PlotRight          float64
	PlotBottom         float64
	LegendY            float64
	Bars               []bar
	Ticks              []tick
	XLabels            []xlabel
	Legend             []legend
	Total              int
}

type bar struct {
	X, W  float64
	Label string
	Total int
	Segs  []seg
}

type seg struct {
	X, W, Y, H    float64
	Color, Series string
	Title         string
	Value         int
}

type tick struct {
	Y     float64
	Label string
}

type xlabel struct {
	X     float64
	Label string
}

type legend struct {
	X            float64
	Color, Label string
}

type series struct{ Key, Label, Color string }

// bucket is one bar's data.
type bucket struct {
	Label  string
	Seqs   Seqs
	Values map[string]int
}

const (
	chartW, chartH = 880, 260
	plotL, plotR   = 48.0, 12.0
	plotT, plotB   = 30.0, 40.0
	maxBars        = 62
)

// Palette: colours that stay apart for common colour blindness and in print.
var (
	colorAllow   = "#2e7d32"
	colorDeny    = "#c62828"
	colorError   = "#ef6c00"
	colorRefuse  = "#6a1b9a"
	colorBG      = "#ad1457"
	colorGrant   = "#1565c0"
	colorNeutral = "#455a64"
	palette      = []string{"#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457", "#9e9d24", "#5d4037"}
)

// granularity chooses day, week or month buckets for the span of days.
func granularity(first, last time.Time) string {
	span := int(last.Sub(first).Hours()/24) + 1
	switch {
	case span <= maxBars:
		return "day"
	case span <= maxBars*7:
		return "week"
	}
	return "month"
}

// bucketStart is the start of the bucket of t.
func bucketStart(t time.Time, gran string) time.Time {
	t = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	switch gran {
	case "week": // weeks start on Monday
		return t.AddDate(0, 0, -((int(t.Weekday()) + 6) % 7))
	case "month":
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return t
}

func nextBucket(t time.Time, gran string) time.Time {
	switch gran {
	case "week":
		return t.AddDate(0, 0, 7)
	case "month":
		return t.AddDate(0, 1, 0)
	}
	return t.AddDate(0, 0, 1)
}

func bucketLabel(t time.Time, gran string) string {
	switch gran {
	case "week":
		return "week of " + t.Format(time.DateOnly)
	case "month":
		return t.Format("2006-01")
	}
	return t.Format(time.DateOnly)
}

// dayBuckets groups the days into buckets, empty ones included, with
// values(day) added up per series.
func dayBuckets(days []Day, values func(Day) map[string]int) ([]bucket, string) {
	if len(days) == 0 {
		return nil, "day"
	}
	first, _ := time.Parse(time.DateOnly, days[0].Date)
	last, _ := time.Parse(time.DateOnly, days[len(days)-1].Date)
	gran := granularity(first, last)
	var out []bucket
	i := 0
	for b := bucketStart(first, gran); !b.After(last); b = nextBucket(b, gran) {
		bk := bucket{Label: bucketLabel(b, gran), Values: map[string]int{}}
		end := nextBucket(b, gran)
		for ; i < len(days); i++ {
			d, _ := time.Parse(time.DateOnly, days[i].Date)
			if !d.Before(end) {
				break
			}
			days[i].Seqs.Each(bk.Seqs.Add)
			for k, v := range values(days[i]) {
				bk.Values[k] += v
			}
		}
		out = append(out, bk)
	}
	return out, gran
}

// niceMax is the top of the y axis: four equal steps, each 1, 2 or 5
// times a power of ten, reaching at least m.
func niceMax(m int) int {
	if m <= 4 {
		return 4
	}
	step := float64(m) / 4
	p := math.Pow(10, math.Floor(math.Log10(step)))
	for _, f := range []float64{1, 2, 2.5, 5, 10} {
		if f*p >= step && (f != 2.5 || p >= 10) {
			return 4 * int(f*p)
		}
	}
	return m
}

// stacked draws buckets as stacked bars of the given series.
func stacked(id, title, caption string, bks []bucket, ss []series) chart {
	c := chart{ID: id, Title: title, Caption: caption, W: chartW, H: chartH,
		PlotX: plotL, PlotY: plotT, PlotW: chartW - plotL - plotR, PlotH: chartH - plotT - plotB}
	c.PlotRight, c.PlotBottom, c.LegendY = c.PlotX+c.PlotW, c.PlotY+c.PlotH, chartH-14
	maxTotal := 0
	for _, b := range bks {
		t := 0
		for _, s := range ss {
			t += b.Values[s.Key]
		}
		maxTotal = max(maxTotal, t)
		c.Total += t
	}
	top := niceMax(maxTotal)
	for i := 0; i <= 4; i++ {
		v := top * i / 4
		c.Ticks = append(c.Ticks, tick{Y: c.PlotY + c.PlotH - c.PlotH*float64(v)/float64(top), Label: fmt.Sprint(v)})
	}
	n := max(len(bks), 1)
	slot := c.PlotW / float64(n)
	w := math.Min(math.Max(slot*0.8, 1), 48) // a lone bar stays a bar
	every := max(1, (n+9)/10)                // at most about ten x labels
	for i, b := range bks {
		x := c.PlotX + slot*float64(i) + (slot-w)/2
		br := bar{X: round1(x), W: round1(w), Label: b.Label}
		y := c.PlotY + c.PlotH
		for _, s := range ss {
			v := b.Values[s.Key]
			if v == 0 {
				continue
			}
			h := c.PlotH * float64(v) / float64(top)
			y -= h
			br.Segs = append(br.Segs, seg{X: br.X, W: br.W, Y: round1(y), H: round1(h), Color: s.Color, Series: s.Key, Value: v,
				Title: fmt.Sprintf("%s, %s: %d (records %s)", b.Label, s.Label, v, shortSeqs(b.Seqs))})
			br.Total += v
		}
		c.Bars = append(c.Bars, br)
		if i%every == 0 {
			lbl := b.Label
			if len(lbl) > 10 && lbl[:8] == "week of " {
				lbl = lbl[8:]
			}
			c.XLabels = append(c.XLabels, xlabel{X: round1(x + w/2), Label: lbl})
		}
	}
	lx := c.PlotX
	for _, s := range ss {
		c.Legend = append(c.Legend, legend{X: round1(lx), Color: s.Color, Label: s.Label})
		lx += 24 + 7*float64(len(s.Label))
	}
	return c
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// shortSeqs is a seq set for a tooltip: its compact form, or its bounds
// when that is long.
func shortSeqs(s Seqs) string {
	if str := s.String(); len(str) <= 40 {
		return str
	}
	return fmt.Sprintf("%d records between %d and %d", s.Len(), s.First(), s.Last())
}

// charts are the report's charts, in page order.
func (rep *Report) charts() []chart {
	per := func(gran string) string { return "per " + gran + " (UTC)" }
	var out []chart
	bks, gran := dayBuckets(rep.Days, func(d Day) map[string]int { return d.Outcomes })
	out = append(out, stacked("chart-outcome", "Accesses "+per(gran)+" by outcome",
		"Rule summary.accesses; each bar's records are named in its tooltip.", bks,
		[]series{{"allow", "allowed", colorAllow}, {"deny", "denied", colorDeny}, {"error", "error (fail closed)", colorError}}))

	totals := map[string]int{}
	for _, d := range rep.Days {
		for k, v := range d.Purposes {
			totals[k] += v
		}
	}
	purposes := slices.SortedFunc(maps.Keys(totals), func(a, b string) int {
		return cmp.Or(cmp.Compare(totals[b], totals[a]), cmp.Compare(a, b))
	})
	const maxPurposes = 7
	var ps []series
	for i, p := range purposes {
		if i == maxPurposes {
			ps = append(ps, series{"other", "other purposes", colorNeutral})
			break
		}
		ps = append(ps, series{p, p, palette[i%len(palette)]})
	}
	bks, gran = dayBuckets(rep.Days, func(d Day) map[string]int {
		m := map[string]int{}
		for k, v := range d.Purposes {
			if slices.Index(purposes, k) >= maxPurposes {
				k = "other"
			}
			m[k] += v
		}
		return m
	})
	out = append(out, stacked("chart-purpose", "Accesses "+per(gran)+" by purpose of use",
		"HL7 PurposeOfUse codes as the callers declared them (TREAT treatment, ETREAT emergency, HRESCH research, ...).", bks, ps))

	bks, gran = dayBuckets(rep.Days, func(d Day) map[string]int {
		return map[string]int{"deny": d.Denials, "refusal": int(d.RefusedRequests)}
	})
	out = append(out, stacked("chart-denials", "Denials and refusals "+per(gran),
		"Rules summary.denials and summary.refused_requests (an aggregate refusal record counts the requests it stands for).", bks,
		[]series{{"deny", "denied accesses", colorDeny}, {"refusal", "requests refused or failed closed", colorRefuse}}))

	bks, gran = dayBuckets(rep.Days, func(d Day) map[string]int {
		return map[string]int{"bg": d.BreakGlass, "grant": d.Grants}
	})
	out = append(out, stacked("chart-breakglass", "Break-the-glass "+per(gran),
		"Emergency (ETREAT) accesses and grant events (grant, revoke, expire, refusal, review).", bks,
		[]series{{"bg", "break-glass accesses", colorBG}, {"grant", "grant events", colorGrant}}))
	return out
}

// monthsChart draws the whole log's records per month (retention).
func (rep *Report) monthsChart() chart {
	var bks []bucket
	ms := rep.Retention.Months
	if len(ms) > 0 {
		first, _ := time.Parse("2006-01", ms[0].Month)
		last, _ := time.Parse("2006-01", ms[len(ms)-1].Month)
		i := 0
		for m := first; !m.After(last); m = m.AddDate(0, 1, 0) {
			b := bucket{Label: m.Format("2006-01"), Values: map[string]int{}}
			if i < len(ms) && ms[i].Month == b.Label {
				b.Seqs, b.Values["records"] = ms[i].Seqs, ms[i].Records
				i++
			}
			bks = append(bks, b)
		}
	}
	return stacked("chart-months", "Records kept per month (whole log)",
		"Every record since the first; none is ever deleted.", bks, []series{{"records", "records", colorNeutral}})
}
