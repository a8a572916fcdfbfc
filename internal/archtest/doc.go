// Package archtest holds the tests that keep burst's layers apart: programs
// (resume, suspend, sizer, agent, slurm-conf) import internal/, internal/
// never imports a program, and the programs Slurm runs on every power-up
// (burst-resume, burst-suspend) and on every node (burst-agent) do not link
// the sizer's database, Prometheus or the simulator. See docs/DESIGN.md.
package archtest
