# burst GPU node image. Build with `make image` (see packer/README.md).
#
# Everything slow is baked in (NVIDIA driver, fabric manager, DCGM, Lustre
# client, munge, slurmd of the head node's Slurm version, burst-agent) so an
# instance joins Slurm seconds after it boots. Per-boot settings come from the
# user data burst-resume writes; burst-bootstrap.service applies them.
#
# Written for Packer >= 1.6 (Debian's packer 1.6.6 validates it offline):
# no required_plugins block, gp3 throughput and iops spelled out.

packer {
  required_version = ">= 1.6.0"
}

variable "region" {
  type        = string
  default     = "us-east-1"
  description = "AWS region to build in; the AMI is registered there."
}

variable "base_ami_name" {
  type        = string
  default     = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) *"
  description = "Name filter for the base AMI (GPU-ready Ubuntu 22.04; newest match wins)."
}

variable "base_ami_owner" {
  type        = string
  default     = "amazon"
  description = "Owner (account ID or alias) of the base AMI."
}

variable "instance_type" {
  type        = string
  default     = "g5.xlarge"
  description = "Build instance type. A GPU type lets 90-validate.sh run nvidia-smi and DCGM against a real GPU."
}

variable "subnet_id" {
  type        = string
  default     = ""
  description = "Subnet for the build instance (empty: the default VPC)."
}

variable "ssh_username" {
  type    = string
  default = "ubuntu"
}

variable "slurm_version" {
  type        = string
  description = "Slurm version built into the image; must equal the head node's (slurmctld -V), e.g. 22.05.8."
}

variable "slurm_sha256" {
  type        = string
  description = "SHA-256 of slurm-<slurm_version>.tar.bz2 from download.schedmd.com (checked before building)."
}

variable "cuda_keyring_sha256" {
  type        = string
  description = "SHA-256 of NVIDIA's cuda-keyring_1.1-1_all.deb (ubuntu2204/x86_64), checked before it is installed."
}

variable "fsx_key_sha256" {
  type        = string
  description = "SHA-256 of AWS's fsx-ubuntu-public-key.asc (the FSx Lustre client repository's signing key), checked before it is trusted."
}

variable "efa_installer_version" {
  type        = string
  default     = "1.43.1"
  description = "aws-efa-installer release (EFA driver, libfabric) from efa-installer.amazonaws.com."
}

variable "efa_installer_sha256" {
  type        = string
  description = "SHA-256 of aws-efa-installer-<efa_installer_version>.tar.gz, checked before it is unpacked."
}

variable "ofi_nccl_version" {
  type        = string
  default     = "1.16.3"
  description = "aws-ofi-nccl release (NCCL's libfabric plugin), built when the EFA installer did not install it."
}

variable "ofi_nccl_sha256" {
  type        = string
  description = "SHA-256 of aws-ofi-nccl-<ofi_nccl_version>.tar.gz from its GitHub release, checked before it is built."
}

variable "slurm_uid" {
  type        = number
  default     = 64030
  description = "UID/GID of the slurm user; must match the head node."
}

variable "burst_version" {
  type        = string
  description = "burst release baked in (recorded in /etc/burst/version and the AMI tags)."
}

variable "burst_agent_binary" {
  type        = string
  description = "Path to the linux/amd64 burst-agent binary to install (make image builds bin/burst-agent)."
}

variable "nvidia_driver_branch" {
  type        = string
  default     = "535"
  description = "NVIDIA driver branch installed when the base AMI has no driver (server variant)."
}

variable "volume_size" {
  type        = number
  default     = 100
  description = "Root volume size in GiB."
}

variable "volume_throughput" {
  type        = number
  default     = 250
  description = "gp3 root volume throughput in MiB/s (125-1000)."
}

variable "volume_iops" {
  type        = number
  default     = 3000
  description = "gp3 root volume IOPS (3000-16000)."
}

variable "ami_name_prefix" {
  type    = string
  default = "burst-node"
}

locals {
  stamp    = formatdate("YYYYMMDD-hhmmss", timestamp())
  ami_name = "${var.ami_name_prefix}-${var.burst_version}-slurm-${var.slurm_version}-${local.stamp}"
}

source "amazon-ebs" "burst-node" {
  region                      = var.region
  instance_type               = var.instance_type
  subnet_id                   = var.subnet_id
  associate_public_ip_address = true
  ssh_username                = var.ssh_username
  ssh_timeout                 = "15m"
  ami_name                    = local.ami_name
  ami_description             = "burst GPU node: Slurm ${var.slurm_version}, burst ${var.burst_version}"
  ena_support                 = true
  sriov_support               = true

  source_ami_filter {
    filters = {
      name                  = var.base_ami_name
      architecture          = "x86_64"
      "root-device-type"    = "ebs"
      "virtualization-type" = "hvm"
    }
    owners      = [var.base_ami_owner]
    most_recent = true
  }

  launch_block_device_mappings {
    device_name           = "/dev/sda1"
    volume_size           = var.volume_size
    volume_type           = "gp3"
    throughput            = var.volume_throughput
    iops                  = var.volume_iops
    delete_on_termination = true
  }

  tags = {
    Name          = local.ami_name
    burst_version = var.burst_version
    slurm_version = var.slurm_version
    base_ami      = "{{ .SourceAMI }}"
    base_ami_name = "{{ .SourceAMIName }}"
  }

  run_tags = {
    Name = "packer-burst-node-build"
  }
}

build {
  sources = ["source.amazon-ebs.burst-node"]

  provisioner "shell" {
    inline = ["mkdir -p /tmp/burst-files"]
  }

  provisioner "file" {
    source      = "${path.root}/files/"
    destination = "/tmp/burst-files"
  }

  provisioner "file" {
    source      = var.burst_agent_binary
    destination = "/tmp/burst-files/burst-agent"
  }

  # OS packages and kernel settings; reboots when it installed a newer kernel.
  provisioner "shell" {
    execute_command   = "sudo -E bash '{{ .Path }}'"
    environment_vars  = ["DEBIAN_FRONTEND=noninteractive"]
    scripts           = ["${path.root}/scripts/10-os.sh"]
    expect_disconnect = true
  }

  provisioner "shell" {
    pause_before    = "20s"
    execute_command = "sudo -E bash '{{ .Path }}'"
    environment_vars = [
      "DEBIAN_FRONTEND=noninteractive",
      "NVIDIA_DRIVER_BRANCH=${var.nvidia_driver_branch}",
      "SLURM_VERSION=${var.slurm_version}",
      "SLURM_SHA256=${var.slurm_sha256}",
      "CUDA_KEYRING_SHA256=${var.cuda_keyring_sha256}",
      "FSX_KEY_SHA256=${var.fsx_key_sha256}",
      "EFA_INSTALLER_VERSION=${var.efa_installer_version}",
      "EFA_INSTALLER_SHA256=${var.efa_installer_sha256}",
      "OFI_NCCL_VERSION=${var.ofi_nccl_version}",
      "OFI_NCCL_SHA256=${var.ofi_nccl_sha256}",
      "SLURM_UID=${var.slurm_uid}",
      "BURST_VERSION=${var.burst_version}",
    ]
    scripts = [
      "${path.root}/scripts/20-nvidia.sh",
      "${path.root}/scripts/30-lustre.sh",
      "${path.root}/scripts/35-efa.sh",
      "${path.root}/scripts/40-slurm.sh",
      "${path.root}/scripts/50-burst.sh",
      "${path.root}/scripts/90-validate.sh",
      "${path.root}/scripts/95-seal.sh",
    ]
  }

  post-processor "manifest" {
    output     = "packer-manifest.json"
    strip_path = true
  }
}
