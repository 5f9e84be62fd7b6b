package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/securemetrics"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/version"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
)

// defaultNamespace is where the reconciler runs when installed from config/;
// a pod learns its own namespace from POD_NAMESPACE (downward API).
const defaultNamespace = v1.SystemNamespace

// defaultEgressGateImage is the reconciler's own image, which carries
// /sandbox-gate beside /agentsandbox (Dockerfile); config/'s Deployment
// names both.
const defaultEgressGateImage = "ghcr.io/agentsandbox/agentsandbox:latest"

// defaultEgressGateway is the egress gateway's Service as config/gateway
// installs it.
const defaultEgressGateway = v1.SystemNamespace + "/" + v1.EgressGatewayName

func newReconcileCommand() *cobra.Command {
	opts := reconcile.ManagerOptions{}
	served := reconcile.Endpoints{}
	controllers := reconcile.Options{}
	var egressGateway string
	metricsSecure := true
	zapOpts := zap.Options{}
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Run the controllers that converge the cluster to the declared sandboxes",
		Long: `Runs the controller manager: leader-elected, with /healthz and /readyz on
--health-addr and Prometheus metrics on --metrics-addr: over TLS, to callers
whose bearer token the API server accepts and who may get the non-resource
URL /metrics (the ClusterRole agentsandbox-metrics-reader grants it; with
--metrics-secure=false, plain HTTP to anyone, for loopback). It uses the in-cluster
service account, or the kubeconfig named by --kubeconfig / $KUBECONFIG.

It never exits because the API server is away: it waits for it (with /readyz
failing and a log line every few seconds), and when an outage costs it the
leader lease it stops every controller and campaigns again. It exits on bad
flags, and when the API server answers but the manager cannot start (the
CRDs of config/ not installed, say).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			log := zap.New(zap.UseFlagOptions(&zapOpts))
			ctrl.SetLogger(log)
			// client-go's own lines (a watch that failed, a lease not
			// renewed) through the same logger: otherwise klog writes them
			// to stderr in its text format, between the JSON lines.
			klog.SetLogger(log)
			if opts.LeaderElection && (opts.RetryPeriod >= opts.RenewDeadline || opts.RenewDeadline >= opts.LeaseDuration) {
				return fmt.Errorf("--leader-elect-retry-period (%s) < --leader-elect-renew-deadline (%s) < --leader-elect-lease-duration (%s) must hold",
					opts.RetryPeriod, opts.RenewDeadline, opts.LeaseDuration)
			}
			if controllers.EgressGateway, err = namespacedName(egressGateway); err != nil {
				return fmt.Errorf("--egress-gateway %q: %w", egressGateway, err)
			}
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return fmt.Errorf("failed to load cluster credentials: %w", err)
			}
			if err := securemetrics.CheckFlags(metricsSecure, served.MetricsCertDir); err != nil {
				return err
			}
			if metricsSecure {
				served.MetricsAuth = cfg
			}
			ctrl.Log.Info("starting reconciler", "version", version.Version, "commit", version.Commit(),
				"leaderElection", opts.LeaderElection, "namespace", opts.LeaderElectionNamespace)
			return reconcile.Run(ctrl.SetupSignalHandler(), cfg, opts, served, controllers)
		},
	}
	namespace := os.Getenv("POD_NAMESPACE")
	if namespace == "" {
		namespace = defaultNamespace
	}
	controllers.Namespace = namespace
	f := cmd.Flags()
	f.StringVar(&served.Metrics, "metrics-addr", ":8080", `address of the Prometheus metrics endpoint ("0" disables it)`)
	f.BoolVar(&metricsSecure, "metrics-secure", metricsSecure, securemetrics.SecureFlagUsage)
	f.StringVar(&served.MetricsCertDir, "metrics-cert-dir", "", securemetrics.CertDirFlagUsage)
	f.StringVar(&served.Pprof, "pprof-addr", "0", `address of Go's /debug/pprof profiles, for memory and CPU questions ("0" disables it; it shows the heap, so keep it on loopback)`)
	f.StringVar(&served.Health, "health-addr", ":8081", `address of the /healthz and /readyz endpoints ("0" disables them)`)
	f.BoolVar(&opts.LeaderElection, "leader-elect", true, "elect one active replica through a Lease")
	f.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", namespace, "namespace of the leader election Lease")
	f.DurationVar(&opts.GracefulShutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "how long running reconciles may take to finish on SIGTERM")
	f.StringVar(&controllers.EgressGateImage, "egress-gate-image", defaultEgressGateImage,
		"image with /sandbox-gate, which every sandbox pod runs before its own processes until its egress NetworkPolicy is enforced; \"\" runs none")
	f.StringVar(&egressGateway, "egress-gateway", defaultEgressGateway,
		"NAMESPACE/NAME of the egress gateway's Service (config/gateway), which templates' hosts rules and endpoints go through; \"\" for none, which refuses such templates' sandboxes")
	f.DurationVar(&opts.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long after the leader's last renewal a standby replica takes over")
	f.DurationVar(&opts.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it stops leading (and campaigns again); also how long requests may fail before /readyz answers 503")
	f.DurationVar(&opts.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "how often replicas try to acquire or renew the lease")
	goFlags := goflagSet()
	zapOpts.BindFlags(goFlags)
	ctrlconfig.RegisterFlags(goFlags) // --kubeconfig
	f.AddGoFlagSet(goFlags)
	return cmd
}

// namespacedName parses NAMESPACE/NAME; "" is no object.
func namespacedName(s string) (types.NamespacedName, error) {
	if s == "" {
		return types.NamespacedName{}, nil
	}
	namespace, name, ok := strings.Cut(s, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, errors.New("want NAMESPACE/NAME, such as agentsandbox-system/agentsandbox-gateway")
	}
	return types.NamespacedName{Namespace: namespace, Name: name}, nil
}
