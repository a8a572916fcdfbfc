// Package jobmeta is the grammar of the metadata a job gives about itself in
// `--comment "burst: params=7B dataset=2TB deadline=8h ..."` (or --extra):
// one pure parser, shared by the sizing policy (what to launch), the
// submission filter and burst-agent (the job's checkpoint signal). Unknown
// keys and malformed values are errors naming the column and a fix.
package jobmeta

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/suggest"
)

// Workload is what a job does with its model; it selects the memory and FLOPs
// models (see MemoryBytesPerParam and FLOPsPerParamToken).
type Workload string

// Workloads understood in metadata (workload=...).
const (
	WorkloadUnknown   Workload = ""
	WorkloadInference Workload = "inference"
	WorkloadLoRA      Workload = "lora"
	WorkloadFinetune  Workload = "finetune"
	WorkloadTrain     Workload = "train"
)

// Precision is the numeric format of a model's weights.
type Precision string

// Precisions understood in metadata (precision=...).
const (
	PrecisionUnknown Precision = ""
	PrecisionFP32    Precision = "fp32"
	PrecisionFP16    Precision = "fp16"
	PrecisionBF16    Precision = "bf16"
	PrecisionFP8     Precision = "fp8"
	PrecisionInt8    Precision = "int8"
	PrecisionInt4    Precision = "int4"
)

// Precisions is every precision metadata accepts (the sizing policy has a
// weight size for each).
var Precisions = []Precision{PrecisionFP32, PrecisionFP16, PrecisionBF16, PrecisionFP8, PrecisionInt8, PrecisionInt4}

// Capacity is how an instance is bought.
type Capacity string

// Capacities. CapacitySpotThenOnDemand (a class setting) means spot first,
// on-demand when spot is unavailable.
const (
	CapacityAny              Capacity = ""
	CapacitySpot             Capacity = "spot"
	CapacityOnDemand         Capacity = "on-demand"
	CapacitySpotThenOnDemand Capacity = "spot-then-on-demand"
)

// BytesPerToken is the dataset-size-to-token conversion used when metadata
// gives dataset= but not tokens=: about 4 bytes of text per token for BPE
// tokenizers on English text (GPT-2/Llama tokenizers average 3.5-4.5).
const BytesPerToken = 4.0

// Metadata is what a job says about itself in `--comment "burst: ..."`.
// Zero values mean "not given".
type Metadata struct {
	Params           float64       // model parameters (params=7B)
	DatasetBytes     float64       // training data size (dataset=2TB)
	Tokens           float64       // training tokens (tokens=1T); wins over DatasetBytes
	Epochs           float64       // passes over the data (epochs=3); 0 means 1
	Deadline         time.Duration // wall-clock deadline from submission (deadline=8h)
	Workload         Workload      // workload=inference|lora|finetune|train
	Precision        Precision     // precision=fp32|fp16|bf16|fp8|int8|int4
	Checkpoint       time.Duration // checkpoint interval (checkpoint=30m)
	NoCheckpoint     bool          // checkpoint=none: the job cannot checkpoint
	CheckpointSignal string        // checkpoint_signal=USR1: signal the agent sends before a spot interruption
	Capacity         Capacity      // capacity=spot|on-demand
	Keys             []string      // keys given, in order (for messages)
}

// HasModel reports whether the job gave its parameter count.
func (m Metadata) HasModel() bool { return m.Params > 0 }

// TrainTokens is the number of tokens the job processes: tokens=, or
// dataset= / BytesPerToken, times epochs. 0 when unknown.
func (m Metadata) TrainTokens() float64 {
	t := m.Tokens
	if t == 0 && m.DatasetBytes > 0 {
		t = m.DatasetBytes / BytesPerToken
	}
	if m.Epochs > 0 {
		t *= m.Epochs
	}
	return t
}

// MetadataPrefix introduces burst metadata in a job comment.
const MetadataPrefix = "burst:"

// MetadataError is one problem in a metadata string. Pos is the 1-based
// column (in bytes) of the offending key=value in the input.
type MetadataError struct {
	Pos   int
	Key   string
	Value string
	Msg   string
	Hint  string
}

func (e *MetadataError) Error() string {
	s := fmt.Sprintf("burst metadata, column %d", e.Pos)
	if e.Key != "" {
		s += fmt.Sprintf(" (%s)", e.Key)
	}
	s += ": " + e.Msg
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// metadataKeys lists every key with its help text (shown for unknown keys).
var metadataKeys = []string{"params", "dataset", "tokens", "epochs", "deadline", "workload", "precision", "checkpoint", "checkpoint_signal", "capacity"}

// ParseMetadata parses burst metadata out of a job comment (or --extra
// string). Only the text after the first "burst:" is read; a comment without
// it carries no metadata and yields no errors. The body is whitespace- or
// comma-separated key=value pairs:
//
//	burst: params=7B dataset=2TB deadline=8h workload=finetune precision=bf16 checkpoint=30m
//
// Every unknown key, repeated key and malformed value is returned as a
// *MetadataError with its column and a hint; valid pairs are still applied.
// Values may only contain letters, digits and . _ - + : / % — anything a shell
// could interpret is refused.
func ParseMetadata(comment string) (Metadata, []error) {
	var md Metadata
	i := strings.Index(comment, MetadataPrefix)
	if i < 0 {
		return md, nil
	}
	return parseBody(comment, i+len(MetadataPrefix))
}

// ParseMetadataBody parses key=value pairs without requiring the "burst:"
// prefix (for Slurm's --extra, where the whole string is burst's).
func ParseMetadataBody(s string) (Metadata, []error) {
	if i := strings.Index(s, MetadataPrefix); i >= 0 {
		return parseBody(s, i+len(MetadataPrefix))
	}
	return parseBody(s, 0)
}

func parseBody(s string, start int) (Metadata, []error) {
	var md Metadata
	var errs []error
	seen := map[string]bool{}
	pos := start
	for pos < len(s) {
		for pos < len(s) && isSep(s[pos]) {
			pos++
		}
		if pos >= len(s) {
			break
		}
		end := pos
		for end < len(s) && !isSep(s[end]) {
			end++
		}
		tok := s[pos:end]
		col := pos + 1
		pos = end
		key, val, ok := strings.Cut(tok, "=")
		if !ok {
			errs = append(errs, &MetadataError{Pos: col, Key: tok, Msg: fmt.Sprintf("%q is not key=value", tok), Hint: "write pairs like params=7B, separated by spaces"})
			continue
		}
		key = strings.ToLower(key)
		if bad := shellUnsafe(val); bad != 0 {
			errs = append(errs, &MetadataError{Pos: col, Key: key, Value: val, Msg: fmt.Sprintf("value contains %q, which is not allowed", bad), Hint: "values may use only letters, digits and . _ - + : / %"})
			continue
		}
		if seen[key] {
			errs = append(errs, &MetadataError{Pos: col, Key: key, Value: val, Msg: "key given twice", Hint: "give each key once"})
			continue
		}
		if err := md.set(key, val); err != nil {
			err.Pos = col
			errs = append(errs, err)
			continue
		}
		seen[key] = true
		md.Keys = append(md.Keys, key)
	}
	return md, errs
}

func isSep(c byte) bool { return c == ' ' || c == '\t' || c == ',' || c == '\n' || c == '\r' }

// shellUnsafe returns the first byte of v outside the allowed set, or 0.
func shellUnsafe(v string) byte {
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("._-+:/%", c) >= 0:
		default:
			return c
		}
	}
	return 0
}

func (md *Metadata) set(key, val string) *MetadataError {
	bad := func(msg, hint string) *MetadataError {
		return &MetadataError{Key: key, Value: val, Msg: msg, Hint: hint}
	}
	if val == "" {
		return bad("empty value", "give a value, e.g. "+key+"="+example(key))
	}
	switch key {
	case "params":
		n, err := parseCount(val)
		if err != nil || n <= 0 {
			return bad(fmt.Sprintf("params=%s is not a parameter count", val), "use a number with optional K, M, B or T, e.g. params=7B")
		}
		md.Params = n
	case "tokens":
		n, err := parseCount(val)
		if err != nil || n <= 0 {
			return bad(fmt.Sprintf("tokens=%s is not a token count", val), "use a number with optional K, M, B or T, e.g. tokens=300B")
		}
		md.Tokens = n
	case "dataset":
		n, err := parseBytes(val)
		if err != nil || n <= 0 {
			return bad(fmt.Sprintf("dataset=%s is not a size", val), "use a size such as 500GB, 2TB or 800GiB")
		}
		md.DatasetBytes = n
	case "epochs":
		f, err := strconv.ParseFloat(val, 64)
		if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			return bad(fmt.Sprintf("epochs=%s is not a positive number", val), "e.g. epochs=3")
		}
		md.Epochs = f
	case "deadline":
		d, err := parseDuration(val)
		if err != nil || d <= 0 {
			return bad(fmt.Sprintf("deadline=%s is not a duration", val), "use a duration such as 8h, 90m, 2d or 1h30m")
		}
		md.Deadline = d
	case "checkpoint":
		switch strings.ToLower(val) {
		case "none", "no", "never", "off":
			md.NoCheckpoint = true
			return nil
		}
		d, err := parseDuration(val)
		if err != nil || d <= 0 {
			return bad(fmt.Sprintf("checkpoint=%s is not a checkpoint interval", val), "use a duration such as 30m, or checkpoint=none if the job cannot checkpoint")
		}
		md.Checkpoint = d
	case "checkpoint_signal":
		sig := strings.TrimPrefix(strings.ToUpper(val), "SIG")
		if !validSignals[sig] {
			return bad(fmt.Sprintf("checkpoint_signal=%s is not a signal burst can send", val), "use one of USR1, USR2, TERM, INT, HUP, CONT")
		}
		md.CheckpointSignal = sig
	case "workload":
		w := Workload(strings.ToLower(val))
		switch w {
		case "fine-tune", "fine_tune", "sft":
			w = WorkloadFinetune
		case "training", "pretrain":
			w = WorkloadTrain
		case "infer", "serve", "serving":
			w = WorkloadInference
		case "qlora", "peft":
			w = WorkloadLoRA
		}
		switch w {
		case WorkloadInference, WorkloadLoRA, WorkloadFinetune, WorkloadTrain:
			md.Workload = w
		default:
			return bad(fmt.Sprintf("workload=%s is not known", val), "use inference, lora, finetune or train")
		}
	case "precision":
		p := Precision(strings.ToLower(val))
		switch p {
		case "float32", "tf32":
			p = PrecisionFP32
		case "float16", "half":
			p = PrecisionFP16
		case "bfloat16":
			p = PrecisionBF16
		}
		if !slices.Contains(Precisions, p) {
			return bad(fmt.Sprintf("precision=%s is not known", val), "use fp32, bf16, fp16, fp8, int8 or int4")
		}
		md.Precision = p
	case "capacity":
		switch c := Capacity(strings.ToLower(val)); c {
		case CapacitySpot, CapacityOnDemand:
			md.Capacity = c
		case "ondemand", "on_demand":
			md.Capacity = CapacityOnDemand
		default:
			return bad(fmt.Sprintf("capacity=%s is not known", val), "use capacity=spot or capacity=on-demand")
		}
	default:
		return &MetadataError{Key: key, Value: val, Msg: fmt.Sprintf("unknown key %q", key), Hint: "known keys: " + strings.Join(metadataKeys, ", ") + didYouMean(key)}
	}
	return nil
}

var validSignals = map[string]bool{"USR1": true, "USR2": true, "TERM": true, "INT": true, "HUP": true, "CONT": true}

func example(key string) string {
	switch key {
	case "params":
		return "7B"
	case "dataset":
		return "2TB"
	case "tokens":
		return "300B"
	case "deadline":
		return "8h"
	case "checkpoint":
		return "30m"
	case "workload":
		return "finetune"
	case "precision":
		return "bf16"
	case "capacity":
		return "spot"
	case "checkpoint_signal":
		return "USR1"
	}
	return "..."
}

// didYouMean proposes the closest known key for a misspelt one.
func didYouMean(key string) string {
	if best := suggest.Closest(key, metadataKeys); best != "" {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	return ""
}

// splitNumber splits "7.5B" into 7.5 and "B".
func splitNumber(s string) (float64, string, error) {
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	if i == 0 {
		return 0, "", fmt.Errorf("no number in %q", s)
	}
	f, err := strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, "", err
	}
	return f, s[i:], nil
}

// parseCount parses 7B, 1.5T, 350M, 20K, 1e9 (as plain digits) into a count.
func parseCount(s string) (float64, error) {
	f, unit, err := splitNumber(s)
	if err != nil {
		return 0, err
	}
	mult := map[string]float64{"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}[strings.ToUpper(unit)]
	if mult == 0 {
		return 0, fmt.Errorf("unknown unit %q", unit)
	}
	return f * mult, nil
}

// parseBytes parses decimal (KB, MB, GB, TB, PB) and binary (KiB ... PiB)
// sizes; a bare number or B is bytes.
func parseBytes(s string) (float64, error) {
	f, unit, err := splitNumber(s)
	if err != nil {
		return 0, err
	}
	u := strings.ToUpper(unit)
	dec := map[string]float64{"": 1, "B": 1, "K": 1e3, "KB": 1e3, "M": 1e6, "MB": 1e6, "G": 1e9, "GB": 1e9, "T": 1e12, "TB": 1e12, "P": 1e15, "PB": 1e15}
	bin := map[string]float64{"KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40, "PIB": 1 << 50}
	if m, ok := dec[u]; ok {
		return f * m, nil
	}
	if m, ok := bin[u]; ok {
		return f * m, nil
	}
	return 0, fmt.Errorf("unknown unit %q", unit)
}

// parseDuration accepts Go durations (1h30m, 90m, 45s) plus days (2d, 1d12h).
func parseDuration(s string) (time.Duration, error) {
	ls := strings.ToLower(s)
	var days float64
	if i := strings.IndexByte(ls, 'd'); i >= 0 {
		f, err := strconv.ParseFloat(ls[:i], 64)
		if err != nil {
			return 0, err
		}
		days, ls = f, ls[i+1:]
	}
	var rest time.Duration
	if ls != "" {
		d, err := time.ParseDuration(ls)
		if err != nil {
			return 0, err
		}
		rest = d
	}
	total := float64(rest) + days*24*float64(time.Hour)
	if total > float64(math.MaxInt64/2) {
		return 0, fmt.Errorf("duration %q too long", s)
	}
	return time.Duration(total), nil
}
