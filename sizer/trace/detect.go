package trace

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Formats ReadAny understands.
const (
	FormatAuto   = "auto"
	FormatPhilly = "philly"
	FormatCSV    = "csv"
	FormatSacct  = "sacct"
	FormatOpenB  = "alibaba-openb" // alibaba/clusterdata cluster-trace-gpu-v2023 pod lists
	FormatDLRM   = "alibaba-dlrm"  // alibaba/clusterdata cluster-trace-gpu-v2025 DLRM serving trace
)

// Formats lists the formats ReadAny reads, for messages.
var Formats = []string{FormatAuto, FormatPhilly, FormatCSV, FormatSacct, FormatOpenB, FormatDLRM}

// DetectFormat names the format of a trace from its first line: the Philly,
// openb or DLRM header, a sacct --parsable2 header (with '|' and JobID),
// else the simple CSV.
func DetectFormat(firstLine string) string {
	l := strings.ToLower(strings.TrimSpace(strings.TrimPrefix(firstLine, "\ufeff")))
	switch {
	case strings.HasPrefix(l, strings.Join(PhillyColumns, ",")):
		return FormatPhilly
	case strings.HasPrefix(l, strings.Join(OpenBColumns[:4], ",")):
		return FormatOpenB
	case strings.HasPrefix(l, strings.Join(DLRMColumns[:3], ",")):
		return FormatDLRM
	case strings.Contains(l, "|") && strings.Contains(l, "jobid"):
		return FormatSacct
	default:
		return FormatCSV
	}
}

// ReadAny reads a trace in the named format (FormatAuto detects it); a
// leading UTF-8 byte order mark is skipped.
func ReadAny(r io.Reader, format string, opt ReadOptions) ([]Job, Report, error) {
	br := bufio.NewReader(r)
	// a UTF-8 byte order mark (spreadsheet exports) is not part of the header
	if b, err := br.Peek(3); err == nil && string(b) == "\xef\xbb\xbf" {
		br.Discard(3)
	}
	if format == "" || format == FormatAuto {
		first, err := br.Peek(4096)
		if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
			return nil, Report{}, fmt.Errorf("detecting trace format: %w", err)
		}
		line, _, _ := strings.Cut(string(first), "\n")
		format = DetectFormat(line)
	}
	switch format {
	case FormatPhilly:
		return ReadPhilly(br, opt)
	case FormatCSV:
		return ReadCSV(br, opt)
	case FormatSacct:
		return ParseSacct(br, opt)
	case FormatOpenB:
		return ReadOpenB(br, opt)
	case FormatDLRM:
		return ReadDLRM(br, opt)
	}
	return nil, Report{}, fmt.Errorf("trace format %q is unknown; want one of %s", format, strings.Join(Formats, ", "))
}
