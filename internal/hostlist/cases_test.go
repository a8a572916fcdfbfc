package hostlist

import "strings"

// expandCase is one row of the Expand table. Every row is also run through
// the real scontrol by TestAgainstScontrol:
//   - want set (valid): scontrol show hostnames prints exactly want;
//   - wantErr set and slurm == nil: scontrol rejects it too ("Invalid hostlist");
//   - wantErr set and slurm != nil: a deliberate divergence; scontrol prints
//     exactly slurm (or slurmCount lines), proving the divergence is real.
type expandCase struct {
	expr       string
	want       []string
	wantErr    error  // ErrSyntax or ErrTooLarge
	errText    string // substring the error message must contain
	slurm      []string
	slurmCount int  // for divergences too big to list
	slurmCrash bool // scontrol 22.05 dies on this input
	// scontrol reports a range error but then ignores it
	slurmSwallows bool
}

func w(s string) []string { return strings.Fields(s) }

var expandCases = []expandCase{
	// Valid expressions.
	{expr: "gpu-[1-3,5]", want: w("gpu-1 gpu-2 gpu-3 gpu-5")},
	{expr: "n[001-003]", want: w("n001 n002 n003")},
	{expr: "n[1-010]", want: w("n1 n2 n3 n4 n5 n6 n7 n8 n9 n10")}, // width comes from the low end
	{expr: "n[01-9]", want: w("n01 n02 n03 n04 n05 n06 n07 n08 n09")},
	{expr: "n[9-011]", want: w("n9 n10 n11")},
	{expr: "n[098-101]", want: w("n098 n099 n100 n101")},
	{expr: "n[010-012]", want: w("n010 n011 n012")},
	{expr: "n[7-7]", want: w("n7")},
	{expr: "n[0-0]", want: w("n0")},
	{expr: "n[00]", want: w("n00")},
	{expr: "r[1-2]-n[01-02]", want: w("r1-n01 r1-n02 r2-n01 r2-n02")},
	{expr: "a[1-2]b[3-4]c[5-6]", want: w("a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 a1b4c6 a2b4c5 a2b4c6")}, // middle bracket slowest
	{expr: "a[1-2]b[3,4]c[5]d[6-7]", want: w("a1b3c5d6 a1b3c5d7 a2b3c5d6 a2b3c5d7 a1b4c5d6 a1b4c5d7 a2b4c5d6 a2b4c5d7")},
	{expr: "n[1-2][3-4]", want: w("n13 n14 n23 n24")},
	{expr: "n1[2]", want: w("n12")},
	{expr: "n[1]2[3]", want: w("n123")},
	{expr: "a,b[1-2],c", want: w("a b1 b2 c")},
	{expr: "a,a,b", want: w("a a b")},
	{expr: "n[1-3,2]", want: w("n1 n2 n3 n2")},
	{expr: "n[3,1-2]", want: w("n3 n1 n2")},
	{expr: "n[01-3],n[1-03]", want: w("n01 n02 n03 n1 n2 n3")},
	{expr: "n1-3", want: w("n1-3")},
	{expr: "[1-2]", want: w("1 2")},
	{expr: "n[1],,[2]", want: w("n1 2")},
	{expr: " a , b ", want: w("a b")},
	{expr: "a\tb\nc d", want: w("a b c d")},
	{expr: "n[1-2] ,x", want: w("n1 n2 x")},
	{expr: ",,a,,", want: w("a")},
	{expr: "", want: []string{}},
	{expr: " , ", want: []string{}},
	{expr: "x[1-2]", want: w("x1 x2")},
	{expr: "ip-10-0-0-[1-3]", want: w("ip-10-0-0-1 ip-10-0-0-2 ip-10-0-0-3")},
	{expr: "gpu-p4d.24xlarge-[9-11]", want: w("gpu-p4d.24xlarge-9 gpu-p4d.24xlarge-10 gpu-p4d.24xlarge-11")},
	{expr: "nœud[1-2]", want: w("nœud1 nœud2")},
	{expr: "n[18446744073709551613-18446744073709551614]", want: w("n18446744073709551613 n18446744073709551614")},
	{expr: "n18446744073709551614", want: w("n18446744073709551614")},
	{expr: "n000000000000000000000000001", want: w("n000000000000000000000000001")},

	// Rejected by both.
	{expr: "n[5-1]", wantErr: ErrSyntax, errText: "reversed range 5-1"},
	{expr: "n[]", wantErr: ErrSyntax, errText: "empty range list"},
	{expr: "n[]x", wantErr: ErrSyntax, errText: "empty range list"},
	{expr: "n[a-b]", wantErr: ErrSyntax, errText: "non-numeric"},
	{expr: "n[1x]", wantErr: ErrSyntax, errText: "non-numeric"},
	{expr: "n[0x10]", wantErr: ErrSyntax, errText: "non-numeric"},
	{expr: "n[[1-2]]", wantErr: ErrSyntax, errText: "nested"},
	{expr: "n[1[2]]", wantErr: ErrSyntax, errText: "nested"},
	{expr: "n[1-2]x", wantErr: ErrSyntax, errText: "after the last ']'"},
	{expr: "a[1]b", wantErr: ErrSyntax, errText: "after the last ']'"},
	{expr: "n[1-2]]", wantErr: ErrSyntax, errText: "without a matching"},
	{expr: "n[-3]", wantErr: ErrSyntax, errText: "malformed range"},
	{expr: "n[1-2-3]", wantErr: ErrSyntax, errText: "malformed range"},
	{expr: "n[1--3]", wantErr: ErrSyntax, errText: "malformed range"},
	{expr: "n[1,,2]", wantErr: ErrSyntax, errText: "empty range"},
	{expr: "n[1,]", wantErr: ErrSyntax, errText: "empty range"},
	{expr: "n[,1]", wantErr: ErrSyntax, errText: "empty range"},
	{expr: "n[1 m]", wantErr: ErrSyntax, errText: "non-numeric"},
	{expr: "a[1 2]b c", wantErr: ErrSyntax, errText: "non-numeric"},
	{expr: "r[a]-n[1]", wantErr: ErrSyntax, errText: "non-numeric"},
	{expr: "a[1]b[x]c[2]", wantErr: ErrSyntax, errText: "non-numeric"},
	{expr: "n[1-65537]", wantErr: ErrTooLarge, errText: "65537 hosts"},
	{expr: "n[0-65536]", wantErr: ErrTooLarge, errText: "Slurm allows 65536"},

	// Deliberate divergences: Slurm 22.05 accepts and mangles these.
	{expr: "n[1-3", wantErr: ErrSyntax, errText: "never closed", slurm: w("n]")},
	{expr: "[1-3", wantErr: ErrSyntax, errText: "never closed", slurm: w("1-3")},
	{expr: "n[[1]", wantErr: ErrSyntax, errText: "nested", slurm: w("n[1")},
	{expr: "a[1b[2]", wantErr: ErrSyntax, errText: "nested", slurm: w("a[1b2")},
	{expr: "q[1],n[1-3", wantErr: ErrSyntax, errText: "never closed", slurm: w("q1 n]")},
	{expr: "a]b", wantErr: ErrSyntax, errText: "without a matching", slurm: w("a]b")},
	{expr: "n1]", wantErr: ErrSyntax, errText: "without a matching", slurm: w("n1]")},
	{expr: "n[1, 3]", wantErr: ErrSyntax, errText: "non-numeric character ' '", slurm: w("n1 n03")},
	{expr: "n[ 1]", wantErr: ErrSyntax, errText: "non-numeric", slurm: w("n01")},
	{expr: "n[+1-3]", wantErr: ErrSyntax, errText: "non-numeric character '+'", slurm: w("n01 n02 n03")},
	{expr: "n[1-+3]", wantErr: ErrSyntax, errText: "non-numeric", slurm: w("n1 n2 n3")},
	{expr: "n[1-]", wantErr: ErrSyntax, errText: "malformed range", slurm: w("n1")},
	{expr: "a\rb", wantErr: ErrSyntax, errText: "control character", slurm: []string{"a\rb"}},
	{expr: "n99999999999999999999999", wantErr: ErrSyntax, errText: "too large", slurm: w("n00018446744073709551615")},
	{expr: "n[99999999999999999999]", wantErr: ErrSyntax, errText: "too large", slurm: w("n18446744073709551615")},
	{expr: "n[18446744073709551614-18446744073709551615]", wantErr: ErrSyntax, errText: "too large", slurmCrash: true},
	// Slurm expands this one fine, but every later parse of the name mangles it.
	{expr: "n99999999999999999999[1]", wantErr: ErrSyntax, errText: "too large", slurm: w("n999999999999999999991")},
	// With three or more brackets, Slurm 22.05 silently drops a token whose
	// bracket before the last two is invalid (_push_range_list ignores the
	// error from its recursive call: rc = MAX(rc, -1)).
	{expr: "a[x]b[1]c[2]", wantErr: ErrSyntax, errText: "non-numeric", slurm: []string{}, slurmSwallows: true},
	{expr: "z1,a[]b[1-2]c[2],z2", wantErr: ErrSyntax, errText: "empty range list", slurm: w("z1 z2"), slurmSwallows: true},
	{expr: "a[1-2]b[5-1]c[1-2]d[1]", wantErr: ErrSyntax, errText: "reversed range", slurm: []string{}, slurmSwallows: true},
	{expr: "a[1-1000]b[1-1001]", wantErr: ErrTooLarge, errText: "more than 1000000 hosts", slurmCount: 1001000},
}

// compressCase is one row of the Compress table; TestAgainstScontrol checks
// want against `scontrol show hostlist` of the names joined with commas.
type compressCase struct {
	names []string
	want  string
}

var compressCases = []compressCase{
	{w("n1 n2 n3"), "n[1-3]"},
	{w("n3 n1 n2"), "n[3,1-2]"}, // no sorting
	{w("n1 n1 n2"), "n[1,1-2]"}, // no dedup
	{w("n01 n02 n3"), "n[01-02,3]"},
	{w("n1 n01"), "n[1,01]"},
	{w("n9 n10"), "n[9-10]"},
	{w("n09 n10"), "n[09-10]"},
	{w("n0099 n100"), "n[0099,100]"},
	{w("n5 n6 n07"), "n[5-6,07]"},
	{w("n8 n9 n10 n11"), "n[8-11]"},
	{w("n9 n10 n011 n12 n012 n13 n0014"), "n[9-10,011,12,012,13,0014]"},
	{w("a b a"), "a,b,a"},
	{w("r1-n01 r1-n02 r2-n01"), "r1-n[01-02],r2-n01"}, // only the last number compresses
	{w("r1-n1 r2-n1 r3-n1"), "r1-n1,r2-n1,r3-n1"},
	{w("n1x n2x"), "n1x,n2x"},
	{w("a1b2 a1b3"), "a1b[2-3]"},
	{w("n n1"), "n,n1"},
	{w("n1 n"), "n1,n"},
	{w("n1 n3 n5"), "n[1,3,5]"},
	{w("n001 n002 n010"), "n[001-002,010]"},
	{w("n0 n1"), "n[0-1]"},
	{w("n00 n01"), "n[00-01]"},
	{w("1 2 3"), "[1-3]"},
	{w("gpu-1 gpu-2 cpu-1 gpu-3"), "gpu-[1-2],cpu-1,gpu-3"},
	{w("gpu-1 gpu-2 gpu-4 cpu-1 cpu-2"), "gpu-[1-2,4],cpu-[1-2]"},
	{w("n99 n100 n101"), "n[99-101]"},
	{w("nœud1 nœud2"), "nœud[1-2]"},
	{w("n18446744073709551613 n18446744073709551614"), "n[18446744073709551613-18446744073709551614]"},
	{w("n000000000000000000000000001 n000000000000000000000000002"), "n[000000000000000000000000001-000000000000000000000000002]"},
	{w("login"), "login"},
	{nil, ""},
}
