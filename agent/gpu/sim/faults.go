package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/burst-hpc/burst/internal/gpuhealth"
)

// Fault is one injected fault (tests and demos only):
//
//	{"kind": "xid", "gpu": 3, "xid": 79}           an Xid event, once
//	{"kind": "ecc_uncorrected_volatile", "gpu": 1, "count": 2}
//	{"kind": "gpu_lost", "gpu": 2}                 the GPU fell off the bus
//	{"kind": "gpu_count", "count": 7}              only 7 GPUs are seen
//
// Any other health kind (row_remap_failed, nvlink_errors, ...) is a
// counter or state on its GPU, like ECC.
type Fault struct {
	Kind  gpuhealth.Kind `json:"kind"`
	GPU   int            `json:"gpu"`
	Xid   uint64         `json:"xid,omitempty"`
	Count uint64         `json:"count,omitempty"`
	// Instance, if set, limits the fault to that EC2 instance (a node name
	// outlives its instances: the replacement is healthy).
	Instance string `json:"instance,omitempty"`
}

// FaultFile is the injection file: {"faults": [...]}. Faults are applied in
// order; the file only grows (an entry applied once is not applied again).
type FaultFile struct {
	Faults []Fault `json:"faults"`
}

// ParseFaults reads a fault file strictly (unknown fields are errors) and
// checks every entry against a node of gpus GPUs, reporting each bad entry
// with its index.
func ParseFaults(r io.Reader, gpus int) (FaultFile, error) {
	var f FaultFile
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return FaultFile{}, fmt.Errorf("reading the fault file: %w", err)
	}
	var errs []error
	for i, x := range f.Faults {
		at := fmt.Sprintf("faults[%d]", i)
		switch x.Kind {
		case gpuhealth.KindXid:
			if x.Xid < 1 || x.Xid > 999 {
				errs = append(errs, fmt.Errorf("%s: xid %d: want 1..999", at, x.Xid))
			}
		case gpuhealth.KindCount:
			if x.Count >= uint64(gpus) {
				errs = append(errs, fmt.Errorf("%s: count %d: want fewer than the node's %d GPUs", at, x.Count, gpus))
			}
			continue
		case "":
			errs = append(errs, fmt.Errorf("%s: kind missing", at))
			continue
		default:
			if _, err := gpuhealth.ParseKind(string(x.Kind)); err != nil || x.Kind == gpuhealth.KindModel {
				errs = append(errs, fmt.Errorf("%s: kind %q cannot be injected (want xid, gpu_count or a counter kind)", at, x.Kind))
				continue
			}
		}
		if x.GPU < 0 || x.GPU >= gpus {
			errs = append(errs, fmt.Errorf("%s: gpu %d: want 0..%d", at, x.GPU, gpus-1))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return FaultFile{}, fmt.Errorf("fault file: %w", err)
	}
	return f, nil
}

// ReadFaultFile reads path only if only root can have written it: a regular
// file owned by root, not writable by group or others, in a directory
// owned by root and not writable by group or others. Job users can never
// inject faults (the simulated reader must be configured, too). A missing
// file is no faults.
func ReadFaultFile(path string, gpus int) (FaultFile, error) {
	dir, err := os.Lstat(filepath.Dir(path))
	if err != nil {
		return FaultFile{}, fmt.Errorf("checking the fault file's directory: %w", err)
	}
	if err := rootOnly(dir); err != nil {
		return FaultFile{}, fmt.Errorf("fault file directory %s: %w", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return FaultFile{}, nil
	}
	if err != nil {
		return FaultFile{}, fmt.Errorf("opening the fault file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return FaultFile{}, fmt.Errorf("checking the fault file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return FaultFile{}, fmt.Errorf("fault file %s: not a regular file", path)
	}
	if err := rootOnly(st); err != nil {
		return FaultFile{}, fmt.Errorf("fault file %s: %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return FaultFile{}, fmt.Errorf("reading the fault file: %w", err)
	}
	return ParseFaults(bytes.NewReader(b), gpus)
}

func rootOnly(fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("cannot read its owner")
	}
	if st.Uid != 0 {
		return fmt.Errorf("owned by uid %d, not root: refused (only root may inject simulated GPU faults)", st.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("mode %v is writable by group or others: refused (chmod go-w)", fi.Mode().Perm())
	}
	return nil
}

func jsonOf(f FaultFile) (io.Reader, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encoding fault: %w", err)
	}
	return bytes.NewReader(b), nil
}
