package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// envLookup reads the KUBE_* fallbacks; a variable so tests can pass their
// own environment.
var envLookup = os.Getenv

// connectionSettings are the provider's cluster settings after the KUBE_*
// environment fallbacks, as plain Go values. Attributes set in the
// configuration win over the environment, as in the kubernetes and helm
// providers.
type connectionSettings struct {
	configPaths          []string
	configContext        string
	configContextUser    string
	configContextCluster string
	host                 string
	tlsServerName        string
	proxyURL             string
	username             string
	password             string
	token                string
	clientCertificate    string
	clientKey            string
	clusterCACertificate string
	insecure             bool
	exec                 *clientcmdapi.ExecConfig
}

// settingsFrom resolves the configuration against the environment.
func settingsFrom(m providerModel, getenv func(string) string) (connectionSettings, error) {
	s := connectionSettings{
		configContext:        stringOr(m.ConfigContext, getenv("KUBE_CTX")),
		configContextUser:    stringOr(m.ConfigContextUser, getenv("KUBE_CTX_AUTH_INFO")),
		configContextCluster: stringOr(m.ConfigContextCluster, getenv("KUBE_CTX_CLUSTER")),
		host:                 stringOr(m.Host, getenv("KUBE_HOST")),
		tlsServerName:        stringOr(m.TLSServerName, getenv("KUBE_TLS_SERVER_NAME")),
		proxyURL:             stringOr(m.ProxyURL, getenv("KUBE_PROXY_URL")),
		username:             stringOr(m.Username, getenv("KUBE_USER")),
		password:             stringOr(m.Password, getenv("KUBE_PASSWORD")),
		token:                stringOr(m.Token, getenv("KUBE_TOKEN")),
		clientCertificate:    stringOr(m.ClientCertificate, getenv("KUBE_CLIENT_CERT_DATA")),
		clientKey:            stringOr(m.ClientKey, getenv("KUBE_CLIENT_KEY_DATA")),
		clusterCACertificate: stringOr(m.ClusterCACertificate, getenv("KUBE_CLUSTER_CA_CERT_DATA")),
	}
	switch {
	case !m.Insecure.IsNull():
		s.insecure = m.Insecure.ValueBool()
	case getenv("KUBE_INSECURE") != "":
		v, err := strconv.ParseBool(getenv("KUBE_INSECURE"))
		if err != nil {
			return s, fmt.Errorf("KUBE_INSECURE=%q is not a boolean (true or false)", getenv("KUBE_INSECURE"))
		}
		s.insecure = v
	}
	switch {
	case !m.ConfigPath.IsNull():
		s.configPaths = []string{m.ConfigPath.ValueString()}
	case len(m.ConfigPaths) > 0:
		s.configPaths = m.ConfigPaths
	case getenv("KUBE_CONFIG_PATH") != "":
		s.configPaths = []string{getenv("KUBE_CONFIG_PATH")}
	case getenv("KUBE_CONFIG_PATHS") != "":
		s.configPaths = filepath.SplitList(getenv("KUBE_CONFIG_PATHS"))
	}
	for i, p := range s.configPaths {
		expanded, err := expandHome(p)
		if err != nil {
			return s, err
		}
		s.configPaths[i] = expanded
	}
	if len(m.Exec) > 0 {
		exec := m.Exec[0]
		s.exec = &clientcmdapi.ExecConfig{
			APIVersion:      exec.APIVersion.ValueString(),
			Command:         exec.Command.ValueString(),
			Args:            exec.Args,
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}
		for k, v := range exec.Env {
			s.exec.Env = append(s.exec.Env, clientcmdapi.ExecEnvVar{Name: k, Value: v})
		}
	}
	return s, nil
}

// clientConfig turns the settings into a deferred client config: nothing is
// read or dialled until the first request needs a rest.Config. With neither
// a kubeconfig nor a host it falls back to the in-cluster service account,
// and says what to set when there is none.
func (s connectionSettings) clientConfig() clientcmd.ClientConfig {
	// An empty loading-rules value on purpose: like the kubernetes provider,
	// never pick up ~/.kube/config or $KUBECONFIG implicitly, so a plan cannot
	// silently target whatever cluster the shell points at.
	rules := &clientcmd.ClientConfigLoadingRules{}
	if len(s.configPaths) == 1 {
		rules.ExplicitPath = s.configPaths[0]
	} else {
		rules.Precedence = s.configPaths
	}
	overrides := &clientcmd.ConfigOverrides{}
	if len(s.configPaths) > 0 {
		overrides.CurrentContext = s.configContext
		overrides.Context.AuthInfo = s.configContextUser
		overrides.Context.Cluster = s.configContextCluster
	}
	overrides.ClusterInfo.TLSServerName = s.tlsServerName
	overrides.ClusterInfo.ProxyURL = s.proxyURL
	overrides.AuthInfo.Username = s.username
	overrides.AuthInfo.Password = s.password
	if s.host != "" {
		// Overrides are applied after client-go's own defaulting, so the
		// scheme and port must be completed here.
		hostURL, _, err := rest.DefaultServerURL(s.host, "", schema.GroupVersion{}, !s.insecure)
		if err == nil {
			overrides.ClusterInfo.Server = hostURL.String()
		} else {
			overrides.ClusterInfo.Server = s.host
		}
	}
	overrides.ClusterInfo.InsecureSkipTLSVerify = s.insecure
	if s.clusterCACertificate != "" {
		overrides.ClusterInfo.CertificateAuthorityData = []byte(s.clusterCACertificate)
	}
	if s.clientCertificate != "" {
		overrides.AuthInfo.ClientCertificateData = []byte(s.clientCertificate)
	}
	if s.clientKey != "" {
		overrides.AuthInfo.ClientKeyData = []byte(s.clientKey)
	}
	if s.token != "" {
		overrides.AuthInfo.Token = s.token
	}
	if s.exec != nil {
		overrides.AuthInfo.Exec = s.exec
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// restConfig loads the REST config, translating clientcmd's terse errors into
// one that names the provider settings.
func (s connectionSettings) restConfig() (*rest.Config, error) {
	if len(s.configPaths) == 0 && s.host == "" && os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return nil, fmt.Errorf("no cluster configured: set config_path (or KUBE_CONFIG_PATH), or host with " +
			"credentials, in the agentsandbox provider block; in a pod the service account is used")
	}
	if len(s.configPaths) == 0 && s.host == "" {
		return rest.InClusterConfig()
	}
	cfg, err := s.clientConfig().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("failed to load the cluster configuration (config_path %s, context %q%s): %w",
			strings.Join(s.configPaths, ", "), s.configContext, s.contextOverrides(), err)
	}
	return cfg, nil
}

// contextOverrides names the context's user and cluster when settings
// replace them, for an error message.
func (s connectionSettings) contextOverrides() string {
	out := ""
	if s.configContextUser != "" {
		out += fmt.Sprintf(", user %q", s.configContextUser)
	}
	if s.configContextCluster != "" {
		out += fmt.Sprintf(", cluster %q", s.configContextCluster)
	}
	return out
}

func stringOr(v types.String, fallback string) string {
	if v.IsNull() || v.IsUnknown() {
		return fallback
	}
	return v.ValueString()
}

func expandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot expand %s: %w", p, err)
	}
	return filepath.Join(home, strings.TrimPrefix(p, "~")), nil
}
