// Package clifilter renders cli_filter.lua for Slurm 22.05's
// CliFilterPlugins=cli_filter/lua: for jobs bound for burst partitions it
// runs `burst-sizer route --filter` with the job's options and applies the
// answer (GRES, nodes, --constraint, partition), prints one line to the user,
// refuses a job the sizer refuses (over budget, bad metadata) and lets the
// job through unchanged when the sizer fails or times out: submission is
// not where spend happens, so a capped account's job is never refused for
// an unknown spend; burst-resume holds it before any instance launches
// until its spend can be known (budgets[].on_unknown, internal/admit).
//
// No user-controlled value is ever interpreted by a shell: every argument is
// passed as one single-quoted word ('...' with ' written as '\”), and the
// sizer's answer is read as key=value lines, not executed.
package clifilter

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// Options configure the generated filter.
type Options struct {
	// SizerPath is the absolute path of burst-sizer.
	SizerPath string
	// GlobalArgs go before the "route" subcommand, e.g. {"--config", "/etc/slurm/burst.yaml"}.
	GlobalArgs []string
	// Partitions are the partitions burst owns; jobs for others pass untouched.
	Partitions []string
	// DefaultPartition is the cluster's default partition when it is one of
	// Partitions (jobs that name no partition go there); "" otherwise.
	DefaultPartition string
	// TimeoutPath is timeout(1), by absolute path; default /usr/bin/timeout.
	TimeoutPath string
	// Timeout bounds the sizer call; default 10s.
	Timeout time.Duration
}

var partRe = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Validate reports every problem with the options.
func (o Options) Validate() error {
	var errs []error
	if !filepath.IsAbs(o.SizerPath) {
		errs = append(errs, fmt.Errorf("sizer path %q must be absolute (Slurm runs the filter without PATH)", o.SizerPath))
	}
	if o.TimeoutPath != "" && !filepath.IsAbs(o.TimeoutPath) {
		errs = append(errs, fmt.Errorf("timeout path %q must be absolute", o.TimeoutPath))
	}
	if len(o.Partitions) == 0 {
		errs = append(errs, errors.New("no burst partitions: the filter would do nothing"))
	}
	for _, p := range o.Partitions {
		if !partRe.MatchString(p) {
			errs = append(errs, fmt.Errorf("partition name %q has characters Slurm does not allow", p))
		}
	}
	if o.DefaultPartition != "" && !contains(o.Partitions, o.DefaultPartition) {
		errs = append(errs, fmt.Errorf("default partition %q is not a burst partition", o.DefaultPartition))
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %s is negative", o.Timeout))
	}
	return errors.Join(errs...)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// LuaString quotes s as a Lua 5.1 string literal (every byte outside
// printable ASCII, and quotes and backslashes, escaped).
func LuaString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "\\%03d", c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// ShellQuote quotes s as one POSIX shell word (the same rule the generated
// Lua applies to job options).
func ShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Render returns cli_filter.lua.
func Render(o Options) ([]byte, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("rendering cli_filter.lua: %w", err)
	}
	if o.TimeoutPath == "" {
		o.TimeoutPath = "/usr/bin/timeout"
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	// The command prefix is fixed at generation time and quoted here.
	words := []string{ShellQuote(o.TimeoutPath), ShellQuote(strconv.Itoa(max(int(o.Timeout.Round(time.Second)/time.Second), 1))), ShellQuote(o.SizerPath)}
	for _, a := range o.GlobalArgs {
		words = append(words, ShellQuote(a))
	}
	words = append(words, "route", "--filter")
	var parts []string
	for _, p := range o.Partitions {
		parts = append(parts, fmt.Sprintf("[%s] = true", LuaString(p)))
	}
	data := map[string]string{
		"Prefix":     LuaString(strings.Join(words, " ")),
		"Partitions": strings.Join(parts, ", "),
		"Default":    "nil",
	}
	if o.DefaultPartition != "" {
		data["Default"] = LuaString(o.DefaultPartition)
	}
	var buf bytes.Buffer
	if err := luaTmpl.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("rendering cli_filter.lua: %w", err)
	}
	return buf.Bytes(), nil
}

// Forwarded lists the sbatch options the filter passes to the sizer, as
// --<name>=<value> (the sizer's route flags have the same names).
var Forwarded = []string{"gres", "gpus", "gpus-per-node", "nodes", "comment", "extra", "account", "job-name", "partition", "time", "requeue", "constraint", "cpus-per-task", "mem"}

var luaTmpl = template.Must(template.New("lua").Funcs(template.FuncMap{"luastr": LuaString, "fwd": func() string {
	var q []string
	for _, f := range Forwarded {
		q = append(q, LuaString(f))
	}
	return strings.Join(q, ", ")
}}).Parse(`-- cli_filter.lua: generated by burst-slurm-conf; do not edit (regenerate instead).
--
-- For jobs bound for burst partitions this asks burst-sizer which node class
-- fits the job and applies the answer: GRES, nodes, --constraint and
-- partition (what the job set explicitly, the sizer keeps). It
-- prints one line to the user, refuses jobs the sizer refuses (over budget,
-- malformed burst metadata) and lets the job through unchanged when the
-- sizer fails or times out. Job options reach the sizer as single-quoted
-- shell words; the sizer's answer is parsed as key=value lines.

local SIZER_CMD = {{.Prefix}}
local BURST_PARTITIONS = { {{.Partitions}} }
local DEFAULT_PARTITION = {{.Default}}
local FORWARDED = { {{fwd}} }

local function shquote(s)
	return "'" .. (string.gsub(s, "'", "'\\''")) .. "'"
end

local function say(msg)
	-- 26.05's cli_filter has slurm.log_user but not the slurm.user_msg it calls
	if type(slurm.log_user) == "function" and type(slurm.user_msg) == "function" then
		slurm.log_user("%s", msg)
	else
		io.stderr:write(msg .. "\n")
	end
end

local function value(options, name)
	local v = options[name]
	if v == nil then return nil end
	v = tostring(v)
	if v == "" or v == "unset" or v == "(null)" then return nil end
	return v
end

local function bound_for_burst(options)
	local p = value(options, "partition")
	if p == nil then return DEFAULT_PARTITION ~= nil end
	for name in string.gmatch(p, "[^,]+") do
		if BURST_PARTITIONS[name] then return true end
	end
	return false
end

local function ask_sizer(options)
	local cmd = SIZER_CMD
	for _, name in ipairs(FORWARDED) do
		local v = value(options, name)
		if v ~= nil then
			cmd = cmd .. " " .. shquote("--" .. name .. "=" .. v)
		end
	end
	-- Slurm names a job without --job-name after its script, or "wrap":
	-- the sizer needs that name to find the job's past runs.
	if value(options, "job-name") == nil then
		local argv = options.argv
		if type(argv) == "table" and argv[1] ~= nil and tostring(argv[1]) ~= "" then
			cmd = cmd .. " " .. shquote("--script=" .. tostring(argv[1]))
		elseif value(options, "wrap") ~= nil then
			cmd = cmd .. " " .. shquote("--job-name=wrap")
		end
	end
	local f = io.popen(cmd .. " 2>/dev/null", "r")
	if f == nil then return nil end
	local out = f:read("*a")
	f:close()
	if out == nil then return nil end
	local ans = {}
	local first = true
	for line in string.gmatch(out, "[^\n]+") do
		if first then
			if line ~= "burst-sizer-filter 1" then return nil end
			first = false
		else
			local k, v = string.match(line, "^([%w_]+)=(.*)$")
			if k ~= nil then ans[k] = v end
		end
	end
	if first or ans["action"] == nil then return nil end
	return ans
end

function slurm_cli_setup_defaults(options, early_pass)
	return slurm.SUCCESS
end

function slurm_cli_pre_submit(options, pack_offset)
	-- a job step inside an allocation (srun in a batch script) is the job's
	-- own business: it was sized when the job was submitted
	if options.type == "srun" and os.getenv("SLURM_JOB_ID") ~= nil then
		return slurm.SUCCESS
	end
	if not bound_for_burst(options) then
		return slurm.SUCCESS
	end
	local ans = ask_sizer(options)
	if ans == nil then
		say("burst: the sizer did not answer; submitting the job unchanged (budgets and limits are still enforced before it starts)")
		return slurm.SUCCESS
	end
	if ans["action"] == "refuse" then
		say("burst: " .. (ans["message"] or "job refused by burst-sizer"))
		return slurm.ERROR
	end
	if ans["action"] == "apply" then
		-- The GPU request goes back in the option the job used: Slurm
		-- refuses --gres mixed with --gpus or --gpus-per-node.
		if ans["gres"] ~= nil and ans["gres"] ~= "" then options["gres"] = ans["gres"] end
		if ans["gpus"] ~= nil and ans["gpus"] ~= "" then options["gpus"] = ans["gpus"] end
		if ans["gpus_per_node"] ~= nil and ans["gpus_per_node"] ~= "" then options["gpus-per-node"] = ans["gpus_per_node"] end
		if ans["nodes"] ~= nil and ans["nodes"] ~= "" then options["nodes"] = ans["nodes"] end
		if ans["constraint"] ~= nil and ans["constraint"] ~= "" then options["constraint"] = ans["constraint"] end
		if ans["partition"] ~= nil and ans["partition"] ~= "" then options["partition"] = ans["partition"] end
	end
	if ans["message"] ~= nil and ans["message"] ~= "" then
		say("burst: " .. ans["message"])
	end
	return slurm.SUCCESS
end

function slurm_cli_post_submit(offset, jobid, stepid)
	return slurm.SUCCESS
end
`))
