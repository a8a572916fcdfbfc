#!/usr/bin/env bash
# Installs what burst's demo and tests need on a fresh Debian machine, and
# nothing that is already there. Run as root (make demo / make test do).
#
#   scripts/install-deps.sh [SLURM_VERSION...]
#
# The Slurm versions to run (default: all of 22.05 24.11 26.05): 22.05 is
# the host's own Debian 12 packages; 24.11 and 26.05 run from Debian roots
# that scripts/slurm-roots.sh builds once per machine and refreshes when the
# mirror has new Slurm packages.
set -euo pipefail
cd "$(dirname "$0")"

versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(22.05 24.11 26.05)
roots=()
for v in "${versions[@]}"; do
  case "$v" in
    22.05) ;;
    24.11 | 26.05) roots+=("$v") ;;
    *) echo "install-deps: unknown Slurm version \"$v\" (supported: 22.05 24.11 26.05)" >&2; exit 1 ;;
  esac
done

need=()
have() { command -v "$1" >/dev/null 2>&1; }
have slurmctld || need+=(slurmctld)
have slurmd || need+=(slurmd)
have scontrol || need+=(slurm-client)
have munged || need+=(munge)
have slurmrestd || need+=(slurmrestd)
# auth/jwt (slurmctld) for burst's REST backend (slurm.api: rest)
[ -e "/usr/lib/$(uname -m)-linux-gnu/slurm-wlm/auth_jwt.so" ] || need+=(slurm-wlm-jwt-plugin)
have packer || need+=(packer)
have shellcheck || need+=(shellcheck)
have ip || need+=(iproute2)
have nsenter || need+=(util-linux)
have perl || need+=(perl)
have curl || need+=(curl)
have rpm || need+=(rpm)     # make package's test lists the .rpm (rpm -qpl)
have dpkg-deb || need+=(dpkg)
have nft || need+=(nftables) # the node bootstrap's IMDS firewall (e2e: inside each node namespace)
# the sizer store's tests run on both drivers, PostgreSQL's a throwaway
# server (initdb into a temporary directory: internal/pgtest)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
# headless Chromium and its WebDriver for the dashboard's browser test
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
if [ ${#roots[@]} -gt 0 ]; then
  have debootstrap || need+=(debootstrap)
  have xz || need+=(xz-utils)
  have flock || need+=(util-linux)
fi
# PyTorch 1.13 (CPU, gloo) for examples/train's real training job; about
# 185 packages, under a minute from the Debian mirror. It runs under
# Debian's /usr/bin/python3, whatever python3 is first on PATH.
torch_ok() {
  dpkg-query -W -f='${Status}' python3-torch 2>/dev/null | grep -q 'install ok installed' ||
    /usr/bin/python3 -c 'import torch' >/dev/null 2>&1
}
torch_ok || need+=(python3-torch)

# burst-slurm-conf cloudformation's test lints the template with cfn-lint
# (Python, not in Debian's archive; no PyPI on CI machines: it comes with
# the machine image). The demo does not need it: a warning here; under make
# test (BURST_REQUIRE_TOOLS=1) TestCloudFormationLint fails without it.
have cfn-lint || [ -x /root/.pyenv/shims/cfn-lint ] ||
  echo "install-deps: cfn-lint is missing (pip install cfn-lint): TestCloudFormationLint fails under make test" >&2
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing ${need[*]}; run as root (sudo make ...) to install them" >&2
    exit 1
  fi
  echo "install-deps: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! have go; then
  if [ -x /usr/local/go/bin/go ]; then
    echo "install-deps: go is at /usr/local/go/bin; add it to PATH" >&2
  else
    echo "install-deps: Go 1.26 is required (https://go.dev/dl); not found" >&2
  fi
  exit 1
fi
# moto (the second EC2: test/moto's contract tests) and botocore's EC2 and
# SQS API models (test/ec2emu/awsmodel checks the emulator's responses
# against them) in the Python the tests run ($BURST_PYTHON, else python3).
# Neither is a Debian package of the right version and PyPI may be out of
# reach, so this checks and says what to install rather than installing.
py=${BURST_PYTHON:-python3}
if ! moto_version=$("$py" -c 'import moto; print(moto.__version__)' 2>/dev/null); then
  echo "install-deps: $py cannot import moto; the moto contract tests (test/moto) need moto 5.x: pip install 'moto[server]>=5,<6' into that Python, or point BURST_PYTHON at one that has it" >&2
  exit 1
fi
if ! "$py" - <<'PY' 2>/dev/null; then
import botocore, glob, os, sys
d = os.path.join(os.path.dirname(botocore.__file__), "data")
sys.exit(0 if all(glob.glob(os.path.join(d, s, "*", "service-2.json*")) for s in ("ec2", "sqs")) else 1)
PY
  echo "install-deps: $py has no botocore with the EC2 and SQS API models (botocore/data/{ec2,sqs}/*/service-2.json[.gz]); the e2e tests check the emulator's responses against them: pip install botocore into that Python, or point BURST_PYTHON at one that has it" >&2
  exit 1
fi
if [ ${#roots[@]} -gt 0 ]; then
  ./slurm-roots.sh "${roots[@]}"
fi
echo "install-deps: ok ($(slurmctld -V) on the host${roots[*]:+, Debian roots for ${roots[*]}}, $(packer version | head -1), $(go version | cut -d' ' -f3), python3-torch $(dpkg-query -W -f='${Version}' python3-torch 2>/dev/null || echo "(not from Debian)"), moto $moto_version)"
