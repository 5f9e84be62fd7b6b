package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// clientFlags are the connection flags every command but reconcile takes:
// the commands act with the caller's kubeconfig, as kubectl does, and, with
// --as, as someone else the caller may impersonate (an administrator
// helping a developer, a pipeline previewing what a GitSync's
// ServiceAccount may apply).
type clientFlags struct {
	kubeconfig, context, as string
	asGroups                []string
}

func (f *clientFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "path of the kubeconfig (default $KUBECONFIG or ~/.kube/config)")
	fl.StringVar(&f.context, "context", "", "kubeconfig context to use")
	fl.StringVar(&f.as, "as", "", "user to impersonate, e.g. system:serviceaccount:agentsandbox-system:NAME")
	fl.StringArrayVar(&f.asGroups, "as-group", nil, "group to impersonate (repeatable; needs --as)")
}

// args are the flags as given, for a command line that runs another
// agentsandbox command with the same connection (ssh-config's
// ProxyCommand).
func (f *clientFlags) args() []string {
	var args []string
	if f.kubeconfig != "" {
		// The other command may run in another directory.
		path, err := filepath.Abs(f.kubeconfig)
		if err != nil {
			path = f.kubeconfig
		}
		args = append(args, "--kubeconfig="+path)
	}
	if f.context != "" {
		args = append(args, "--context="+f.context)
	}
	if f.as != "" {
		args = append(args, "--as="+f.as)
	}
	for _, g := range f.asGroups {
		args = append(args, "--as-group="+g)
	}
	return args
}

// loader reads the kubeconfig as kubectl does: the file --kubeconfig names,
// else $KUBECONFIG, else ~/.kube/config, with --context and --as applied.
func (f *clientFlags) loader() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: f.context}
	overrides.AuthInfo.Impersonate, overrides.AuthInfo.ImpersonateGroups = f.as, f.asGroups
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// contextName is the kubeconfig context the flags select, for display.
func (f *clientFlags) contextName() string {
	if f.context != "" {
		return f.context
	}
	raw, err := f.loader().RawConfig()
	if err != nil {
		return ""
	}
	return raw.CurrentContext
}

// config loads the kubeconfig (loader) for a client.
func (f *clientFlags) config() (*rest.Config, error) {
	if len(f.asGroups) > 0 && f.as == "" {
		return nil, errors.New("--as-group needs --as: the API server impersonates groups only of an impersonated user")
	}
	cfg, err := f.loader().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("failed to load kubeconfig: %w", err)
	}
	// client-go logs what it also returns as errors (stream hiccups) and
	// its own throttling; the commands report errors themselves, and
	// scripts read stdout and stderr. A logger, not an output: klog writes
	// errors to stderr whatever its output is (its stderrthreshold), and
	// client-go's "Copying stdin failed" after a stream ended was one.
	klog.SetLogger(logr.Discard())
	// client-go's default of 5 requests a second would make a diff of a
	// thousand declarations (a dry run each) take minutes; the API
	// server's priority and fairness keeps one user's burst from
	// starving others.
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.UserAgent = "agentsandbox-cli"
	return cfg, nil
}

// kubeClient is a client of the agentsandbox.dev kinds (and the core ones)
// for the GitOps commands.
func (f *clientFlags) kubeClient() (client.Client, error) {
	cfg, err := f.config()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: kubescheme.Scheme})
}

// client is the SDK as the flags' identity. An operation on a sandbox
// stopped for idleness wakes it, with progress on stderr.
func (f *clientFlags) client() (*sandboxclient.Client, error) {
	cfg, err := f.config()
	if err != nil {
		return nil, err
	}
	c, err := sandboxclient.New(cfg)
	if err != nil {
		return nil, err
	}
	c.Waking = progressPrinter(os.Stderr)
	// A person at a terminal hears once that a sandbox's operations go
	// through plain exec (its pod has no sandbox agent); scripts, which
	// read stderr, do not.
	if term.IsTerminal(int(os.Stderr.Fd())) {
		c.Notices = os.Stderr
	}
	return c, nil
}

// outputFlag is -o for the commands that print sandboxes.
type outputFlag struct{ format string }

func (o *outputFlag) register(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.format, "output", "o", "", "output format: json, yaml, or name (the names alone, one a line, as the other commands take them; default a table)")
}

func (o *outputFlag) validate() error {
	switch o.format {
	case "", "json", "yaml", "name":
		return nil
	}
	return fmt.Errorf("unknown output format %q: use json, yaml or name", o.format)
}

// print writes the sandboxes as a table, or for scripts as JSON or YAML
// (one object for a single sandbox, a List otherwise) or their names.
func (o *outputFlag) print(w io.Writer, single bool, sandboxes ...v1.Sandbox) error {
	if o.format == "name" {
		for _, s := range sandboxes {
			if _, err := fmt.Fprintln(w, s.Name); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range sandboxes {
		sandboxes[i].APIVersion, sandboxes[i].Kind = v1.GroupVersion.String(), v1.KindSandbox
	}
	if sandboxes == nil {
		sandboxes = []v1.Sandbox{} // "items": [], not null, for scripts
	}
	var obj any = &v1.SandboxList{Items: sandboxes}
	if single {
		obj = &sandboxes[0]
	} else {
		obj.(*v1.SandboxList).APIVersion, obj.(*v1.SandboxList).Kind = "v1", "List"
	}
	switch o.format {
	case "json":
		data, err := json.MarshalIndent(obj, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	case "yaml":
		data, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	_, _ = fmt.Fprintln(tw, "NAME\tSTATE\tPHASE\tLAUNCH\tOWNER\tAGE\tIDLE")
	now := time.Now()
	for _, s := range sandboxes {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, orNone(string(s.Spec.State)), orNone(string(s.Status.Phase)),
			orNone(string(s.Status.LaunchType)), s.Spec.Owner, duration.HumanDuration(now.Sub(s.CreationTimestamp.Time)), orNone(idleSummary(&s, now)))
	}
	return tw.Flush()
}

// idleSummary says how long a sandbox has gone unused and when it stops
// for that ("idle 12m, stops in 3m"), or that it stopped for idleness; ""
// when it has no idle timeout: the IDLE column of the tables.
func idleSummary(s *v1.Sandbox, now time.Time) string {
	idle := s.Status.Idle
	switch {
	case idle == nil:
		return ""
	case s.IdleStopped():
		return "stopped after " + duration.HumanDuration(idle.Timeout.Duration) + " unused"
	case idle.StopAt == nil || s.Status.LastActivityAt == nil:
		return "timeout " + duration.HumanDuration(idle.Timeout.Duration)
	}
	return fmt.Sprintf("idle %s, stops in %s", duration.HumanDuration(now.Sub(s.Status.LastActivityAt.Time)), duration.HumanDuration(idle.StopAt.Sub(now)))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// progressPrinter reports a wait on w, one line per change.
func progressPrinter(w io.Writer) func(sandboxclient.Progress) {
	return func(p sandboxclient.Progress) {
		phase := string(p.Phase)
		if phase == "" {
			phase = "requested" // the controller has not written a status yet
		}
		msg := fmt.Sprintf("sandbox %s: %s", p.Name, phase)
		if p.Message != "" {
			msg += " (" + p.Message + ")"
		}
		_, _ = fmt.Fprintf(w, "%s [%s]\n", msg, p.Elapsed.Round(100*time.Millisecond))
	}
}

// describeLaunch says how a sandbox was launched, and why it was cold when
// it came from a pool: an agent should know when the pool ran empty.
func describeLaunch(s *v1.Sandbox) string {
	switch {
	case s.Spec.WarmPoolRef != nil && s.Status.LaunchType == v1.LaunchWarm:
		return fmt.Sprintf("warm from pool %s", s.Spec.WarmPoolRef.Name)
	case s.Spec.WarmPoolRef != nil && s.Status.LaunchMessage != "":
		return "cold-started: " + s.Status.LaunchMessage
	case s.Spec.WarmPoolRef != nil:
		return fmt.Sprintf("cold-started from pool %s's template", s.Spec.WarmPoolRef.Name)
	}
	return fmt.Sprintf("cold-started from template %s", s.Spec.TemplateRef.Name)
}

// splitCommand takes the command after "--": cobra hands it over as the
// arguments after ArgsLenAtDash.
func splitCommand(cmd *cobra.Command, args []string, before int) ([]string, []string, error) {
	dash := cmd.ArgsLenAtDash()
	if dash < 0 || dash != before || len(args) == dash {
		usage := strings.TrimSpace(cmd.UseLine())
		return nil, nil, errors.New("give the command after --, as in: " + usage)
	}
	return args[:dash], args[dash:], nil
}
