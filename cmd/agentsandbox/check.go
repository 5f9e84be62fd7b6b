package main

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentsandbox/terraform-provider-agentsandbox/isolationcheck"
)

// probeCommand is the binary the check copies into sandboxes: the egress
// gate's, which carries the probes.
const probeCommand = "sandbox-gate"

func newCheckCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check what a cluster's sandboxes hold against the code run inside them",
	}
	cmd.AddCommand(newCheckIsolationCommand())
	return cmd
}

func newCheckIsolationCommand() *cobra.Command {
	var conn clientFlags
	var opts isolationcheck.Options
	var probePath, output string
	cmd := &cobra.Command{
		Use:   "isolation (--template TEMPLATE | --pool POOL)",
		Short: "Attack a template's sandboxes from inside and print what held; exits 1 on any escape",
		Long: `Starts two sandboxes from the template (or claims two members of the warm
pool, warm as agents get them) with your own rights, copies a probe
into them and attacks from inside, as code run there would: the node, its
kubelet, its other ports and NodePort range, the cloud metadata address,
the API server, the other sandbox over IPv4 and IPv6, every DNS resolver
it could ask (its resolv.conf's, the cluster's usual DNS address, each
--resolver) asked for a name no rule allows, the moment a sandbox starts
(after a stop and start), the process limit and the workspace's size, and
what the code sees of itself (user, capabilities, seccomp, service account
token, the node's processes, the kernel). Then it deletes the sandboxes and
prints one table: probe, expected, observed, result.

What is expected follows from the template: a destination its egress
allows is reported, not judged. The exit code is 0 when everything held,
1 when something escaped or could not be tried, 2 when the check could not
run at all. Run it after installing, after changing the CNI or the nodes,
and for each template untrusted code uses.

The probe is the sandbox-gate binary (the egress gate's, in the same
release), taken from --probe, from beside this binary, or from PATH; it
must be built for the nodes' architecture (CGO_ENABLED=0 GOOS=linux).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %q: want table or json", output)
			}
			probe, err := readProbe(probePath)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			opts.Probe = probe
			sdk, err := conn.client()
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			reader, err := conn.kubeClient()
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			ctx, caught := interruptible(cmd.Context())
			start := time.Now()
			opts.Progress = func(step string) {
				_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "%s [%s]\n", step, time.Since(start).Round(100*time.Millisecond))
			}
			report, err := isolationcheck.Run(ctx, sdk, reader, opts)
			if code, interrupted := caught(); interrupted {
				return &exitError{code: code}
			}
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				err = enc.Encode(report)
			} else {
				err = report.Print(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if report.Failed() > 0 {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	conn.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&opts.Template, "template", "", "the SandboxTemplate whose sandboxes to attack")
	fl.StringVar(&opts.Pool, "pool", "", "or the WarmPool whose members to claim and attack")
	fl.StringArrayVar(&opts.Unreachable, "unreachable", nil, "a HOST:PORT the sandboxes must not reach, say a database of yours (repeatable)")
	fl.StringArrayVar(&opts.Resolvers, "resolver", nil, "another DNS server IP[:PORT] the sandboxes' code might ask besides its resolv.conf's, say a node-local DNS cache (repeatable)")
	fl.IntVar(&opts.MaxProcesses, "max-processes", isolationcheck.DefaultMaxProcesses, "how many processes a sandbox may start before its process limit counts as missing")
	fl.DurationVar(&opts.ReadyTimeout, "ready-timeout", 5*time.Minute, "how long each sandbox may take to be Ready")
	fl.StringVar(&probePath, "probe", "", "the "+probeCommand+" binary to copy into the sandboxes (default: beside this binary, else on PATH)")
	fl.StringVarP(&output, "output", "o", "table", "table or json")
	cmd.MarkFlagsOneRequired("template", "pool")
	cmd.MarkFlagsMutuallyExclusive("template", "pool")
	return cmd
}

// readProbe reads the probe binary from path, or finds it, and makes sure
// it is a Linux executable.
func readProbe(path string) ([]byte, error) {
	if path == "" {
		path = findProbe()
	}
	if path == "" {
		return nil, fmt.Errorf("no %s binary beside this one or on PATH: build it (make build puts it in bin/, "+
			"or CGO_ENABLED=0 GOOS=linux go build ./cmd/%s) and pass --probe", probeCommand, probeCommand)
	}
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--probe %s: not a Linux executable (%v): build it with CGO_ENABLED=0 GOOS=linux go build ./cmd/%s", path, err, probeCommand)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return nil, fmt.Errorf("--probe %s: an ELF %s, not an executable", path, f.Type)
	}
	return os.ReadFile(path)
}

func findProbe() string {
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), probeCommand)
		if _, err := os.Stat(beside); err == nil {
			return beside
		}
	}
	found, _ := exec.LookPath(probeCommand)
	return found
}
