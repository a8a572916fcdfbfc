package trace

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// CSVColumns is burst's simple trace format:
//
//	submit,duration,gpus[,gpu_model][,metadata]
//
// submit is either seconds (a decimal number, taken as seconds since the
// Unix epoch, so 0, 60, 3600 make a relative trace) or an RFC 3339 time;
// duration is seconds (decimal) or a Go duration ("1h30m"); gpus is a whole
// number >= 1; gpu_model is a GRES type ("a100") or empty; metadata is free
// text (quote it if it has commas). The header line is optional; when
// present it must name the columns in this order. Rows need not be sorted.
var CSVColumns = []string{"submit", "duration", "gpus", "gpu_model", "metadata"}

// ReadCSV parses the simple trace format described at CSVColumns and returns
// the jobs sorted by submit time.
func ReadCSV(r io.Reader, opt ReadOptions) ([]Job, Report, error) {
	c := &collector{opt: opt}
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	first := true
	err := c.eachCSV(cr, "trace csv", func(line int, rec []string) error {
		if first {
			first = false
			if isCSVColumn(rec[0]) {
				return checkCSVHeader(line, rec)
			}
		}
		j, err := csvRow(line, rec, opt.loc())
		return c.add(line, j, true, err)
	})
	if err != nil {
		return nil, c.rep, err
	}
	return c.done()
}

func isCSVColumn(s string) bool {
	for _, c := range CSVColumns {
		if strings.EqualFold(strings.TrimSpace(s), c) {
			return true
		}
	}
	return false
}

func checkCSVHeader(line int, rec []string) error {
	if len(rec) < 3 || len(rec) > len(CSVColumns) {
		return badRow(line, "header has %d columns; want %s (the last two optional)", len(rec), strings.Join(CSVColumns, ","))
	}
	for i, h := range rec {
		if !strings.EqualFold(strings.TrimSpace(h), CSVColumns[i]) {
			return badRow(line, "header column %d is %q, want %q", i+1, h, CSVColumns[i])
		}
	}
	return nil
}

func csvRow(line int, rec []string, loc *time.Location) (Job, error) {
	if len(rec) < 3 || len(rec) > len(CSVColumns) {
		return Job{}, badRow(line, "has %d fields; want submit,duration,gpus[,gpu_model][,metadata]", len(rec))
	}
	sub, err := parseSubmit(rec[0], loc)
	if err != nil {
		return Job{}, badRow(line, "submit %q: %v", rec[0], err)
	}
	dur, err := parseDuration(rec[1])
	if err != nil {
		return Job{}, badRow(line, "duration %q: %v", rec[1], err)
	}
	gpus, err := strconv.Atoi(strings.TrimSpace(rec[2]))
	if err != nil {
		return Job{}, badRow(line, "gpus %q is not a whole number", rec[2])
	}
	j := Job{ID: strconv.Itoa(line), Submit: sub, Duration: dur, GPUs: gpus}
	if len(rec) > 3 {
		j.GPUModel = strings.ToLower(strings.TrimSpace(rec[3]))
		if strings.ContainsAny(j.GPUModel, " \t:=") {
			return Job{}, badRow(line, "gpu_model %q is not a GRES type like a100 or h100", rec[3])
		}
	}
	if len(rec) > 4 {
		j.Metadata = rec[4]
	}
	return j, nil
}

// parseSubmit takes seconds since the epoch or an RFC 3339 time.
func parseSubmit(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > maxSeconds {
			return time.Time{}, fmt.Errorf("want seconds or an RFC 3339 time")
		}
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(math.Round(frac*1e9))).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("want seconds or an RFC 3339 time like 2026-01-02T15:04:05Z")
	}
	return t, nil
}

// parseDuration takes seconds (decimal) or a Go duration string.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, err := parseSeconds(s); err == nil {
		return d, nil
	} else if _, ferr := strconv.ParseFloat(s, 64); ferr == nil {
		return 0, err
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want seconds or a duration like 1h30m")
	}
	if d < 0 {
		return 0, fmt.Errorf("is negative; want a duration >= 0")
	}
	return d, nil
}

// WriteCSV writes jobs in the simple format, with a header: submit as
// RFC 3339 in UTC, duration in seconds.
func WriteCSV(w io.Writer, jobs []Job) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVColumns); err != nil {
		return fmt.Errorf("writing trace csv: %w", err)
	}
	for _, j := range jobs {
		rec := []string{
			j.Submit.UTC().Format(time.RFC3339Nano),
			strconv.FormatFloat(j.Duration.Seconds(), 'f', -1, 64),
			strconv.Itoa(j.GPUs),
			j.GPUModel,
			j.Metadata,
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("writing trace csv job %s: %w", j.ID, err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("writing trace csv: %w", err)
	}
	return nil
}
