package v1alpha1_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestInvalidObjectsAreRejected sends objects the CRD schema must refuse and
// checks that the API server says Invalid and names the offending field, so
// a user of kubectl, Terraform or GitOps learns what to fix.
func TestInvalidObjectsAreRejected(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	long := strings.Repeat("a", 64)

	cases := []struct {
		name string
		obj  client.Object
		// field is the path the error message must name; message a phrase
		// it must contain.
		field, message string
	}{
		{"node pool without runtime handler", with(nodePool(""), func(o *v1.NodePool) { o.Spec.RuntimeHandler = "" }), "spec.runtimeHandler", ""},
		{"node pool handler not a DNS label", with(nodePool(""), func(o *v1.NodePool) { o.Spec.RuntimeHandler = "Run_SC" }), "spec.runtimeHandler", "should match"},
		{"node pool with empty node selector", with(nodePool(""), func(o *v1.NodePool) { o.Spec.NodeSelector = map[string]string{} }), "spec.nodeSelector", ""},
		{"node pool taint with bad effect", with(nodePool(""), func(o *v1.NodePool) {
			o.Spec.Taints = []v1.NodePoolTaint{{Key: "sandbox", Effect: "Sometimes"}}
		}), "spec.taints[0].effect", "Unsupported value"},
		{"node pool name with a dot", with(nodePool(""), func(o *v1.NodePool) { o.Name = "gvisor.pool" }), "metadata.name", "DNS label"},
		{"template without image", with(template(""), func(o *v1.SandboxTemplate) { o.Spec.Image = "" }), "spec.image", ""},
		{"template with malformed image reference", with(template(""), func(o *v1.SandboxTemplate) { o.Spec.Image = "Python Sandbox:latest" }), "spec.image", "should match"},
		{"template with image tag too exotic", with(template(""), func(o *v1.SandboxTemplate) { o.Spec.Image = "python:3.12:slim" }), "spec.image", "should match"},
		{"template with bad pull policy", with(template(""), func(o *v1.SandboxTemplate) { o.Spec.ImagePullPolicy = "Sometimes" }), "spec.imagePullPolicy", "Unsupported value"},
		{"template port out of range", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Ports = []v1.ContainerPort{{ContainerPort: 70000}}
		}), "spec.ports[0].containerPort", "less than or equal to 65535"},
		{"template egress host with a scheme", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Network.Egress = []v1.EgressRule{{Hosts: []string{"https://pypi.org"}}}
		}), "spec.network.egress[0].hosts[0]", "should match"},
		{"template egress host upper case", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Network.Egress = []v1.EgressRule{{Hosts: []string{"PyPI.org"}}}
		}), "spec.network.egress[0].hosts[0]", "should match"},
		{"template egress wildcard in the middle", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Network.Egress = []v1.EgressRule{{Hosts: []string{"api.*.example.com"}}}
		}), "spec.network.egress[0].hosts[0]", "should match"},
		{"template egress rule with cidr and hosts", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Network.Egress = []v1.EgressRule{{CIDR: "0.0.0.0/0", Hosts: []string{"pypi.org"}}}
		}), "spec.network.egress[0]", "set exactly one of cidr, hosts or service"},
		{"template egress rule with nothing", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Network.Egress = []v1.EgressRule{{Ports: []v1.NetworkPort{{Port: 443}}}}
		}), "spec.network.egress[0]", "set exactly one of cidr, hosts or service"},
		{"template egress hosts with except", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Network.Egress = []v1.EgressRule{{Hosts: []string{"pypi.org"}, Except: []string{"10.0.0.0/8"}}}
		}), "spec.network.egress[0]", "a hosts rule has none"},
		{"template egress service without a name", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Network.Egress = []v1.EgressRule{{Service: &v1.ServiceReference{Namespace: "models"}}}
		}), "spec.network.egress[0].service.name", ""},
		{"template endpoint with ftp URL", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Network.Endpoints = []v1.Endpoint{{Name: "openai", URL: "ftp://api.openai.com"}}
		}), "spec.network.endpoints[0].url", "should match"},
		{"template endpoint URL with a user", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Network.Endpoints = []v1.Endpoint{{Name: "openai", URL: "https://key@api.openai.com"}}
		}), "spec.network.endpoints[0].url", "should match"},
		{"template endpoint name upper case", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Network.Endpoints = []v1.Endpoint{{Name: "OpenAI", URL: "https://api.openai.com"}}
		}), "spec.network.endpoints[0].name", "should match"},
		{"template endpoints with one name twice", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Network.Endpoints = []v1.Endpoint{{Name: "openai", URL: "https://api.openai.com"}, {Name: "openai", URL: "https://example.com"}}
		}), "spec.network.endpoints[1]", "Duplicate value"},
		{"template endpoint credential without a key", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Network.Endpoints = []v1.Endpoint{{Name: "openai", URL: "https://api.openai.com", Credential: &v1.EndpointCredential{SecretRef: v1.SecretKeyReference{Name: "openai"}}}}
		}), "spec.network.endpoints[0].credential.secretRef.key", ""},
		{"template endpoint credential header with a space", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Network.Endpoints = []v1.Endpoint{{Name: "openai", URL: "https://api.openai.com", Credential: &v1.EndpointCredential{
				SecretRef: v1.SecretKeyReference{Name: "openai", Key: "key"}, Header: "X Api Key",
			}}}
		}), "spec.network.endpoints[0].credential.header", "should match"},
		{"template with duplicate ports", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Ports = []v1.ContainerPort{{ContainerPort: 8888, Protocol: "TCP"}, {ContainerPort: 8888, Protocol: "TCP"}}
		}), "spec.ports[1]", "Duplicate value"},
		{"template egress CIDR malformed", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Network.Egress = []v1.EgressRule{{CIDR: "10.0.0.0/33"}}
		}), "spec.network.egress[0].cidr", "is not a CIDR"},
		{"template egress port range reversed", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Network.Egress = []v1.EgressRule{{CIDR: "0.0.0.0/0", Ports: []v1.NetworkPort{{Port: 443, EndPort: ptr.To[int32](80)}}}}
		}), "spec.network.egress[0].ports[0].endPort", "endPort must not be lower than port"},
		{"template running as root", with(template(""), func(o *v1.SandboxTemplate) { o.Spec.SecurityContext.RunAsUser = ptr.To[int64](0) }), "spec.securityContext.runAsUser", "greater than or equal to 1"},
		{"template requests above limits", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Resources = v1.Resources{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			}
		}), "spec.resources", "less than or equal to its limit"},
		{"template requesting GPUs", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Resources = v1.Resources{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}
		}), "spec.resources.requests", "only cpu, memory and ephemeral-storage"},
		{"template storage class on an ephemeral workspace", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Workspace = v1.Workspace{StorageClassName: ptr.To("fast")}
		}), "spec.workspace.storageClassName", "needs persistent: true"},
		{"template relative mount path", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Workspace = v1.Workspace{Persistent: true, MountPath: "workspace"}
		}), "spec.workspace.mountPath", "should match"},
		{"template with zero-size workspace", with(template(""), func(o *v1.SandboxTemplate) {
			o.Spec.Workspace = v1.Workspace{Persistent: true, Size: ptr.To(resource.MustParse("0"))}
		}), "spec.workspace.size", "greater than zero"},
		{"template with bad env injection policy", with(template(""), func(o *v1.SandboxTemplate) { o.Spec.EnvVarsInjectionPolicy = "Sometimes" }), "spec.envVarsInjectionPolicy", "Unsupported value"},
		{"template env name starting with a digit", with(template(""), func(o *v1.SandboxTemplate) { o.Spec.Env = []v1.EnvVar{{Name: "1PASSWORD", Value: "x"}} }), "spec.env[0].name", "should match"},
		{"template name too long", with(template(""), func(o *v1.SandboxTemplate) { o.Name = long }), "metadata.name", "at most 63 characters"},
		{"warm pool with negative replicas", with(warmPool(""), func(o *v1.WarmPool) { o.Spec.Replicas = ptr.To[int32](-1) }), "spec.replicas", "greater than or equal to 0"},
		{"warm pool with unknown strategy", with(warmPool(""), func(o *v1.WarmPool) { o.Spec.UpdateStrategy.Type = "RollingUpdate" }), "spec.updateStrategy.type", "Unsupported value"},
		{"warm pool without template", with(warmPool(""), func(o *v1.WarmPool) { o.Spec.TemplateRef.Name = "" }), "spec.templateRef.name", ""},
		{"warm pool with unknown empty policy", with(warmPool(""), func(o *v1.WarmPool) { o.Spec.WhenEmpty = "Queue" }), "spec.whenEmpty", "Unsupported value"},
		{"sandbox with both refs", with(sandbox(""), func(o *v1.Sandbox) { o.Spec.WarmPoolRef = &v1.LocalObjectReference{Name: "python"} }), "spec", "exactly one of templateRef and warmPoolRef"},
		{"sandbox with no ref", with(sandbox(""), func(o *v1.Sandbox) { o.Spec.TemplateRef = nil }), "spec", "exactly one of templateRef and warmPoolRef"},
		{"sandbox with unknown state", with(sandbox(""), func(o *v1.Sandbox) { o.Spec.State = "Paused" }), "spec.state", "Unsupported value"},
		{"sandbox with shutdown time and ttl", with(sandbox(""), func(o *v1.Sandbox) {
			o.Spec.TTL = &metav1.Duration{Duration: time.Hour}
			o.Spec.ShutdownTime = &metav1.Time{Time: time.Now().Add(time.Hour)}
		}), "spec", "at most one of shutdownTime and ttl"},
		{"sandbox with unknown shutdown policy", with(sandbox(""), func(o *v1.Sandbox) { o.Spec.ShutdownPolicy = "Retain" }), "spec.shutdownPolicy", "Unsupported value"},
		{"sandbox name too long for its namespace", with(sandbox(""), func(o *v1.Sandbox) { o.Name = strings.Repeat("s", 56) }), "metadata.name", "at most 55 characters"},
		{"git sync with ftp URL", with(gitSync(""), func(o *v1.GitSync) { o.Spec.URL = "ftp://git.example.com/repo" }), "spec.url", "should match"},
		{"git sync with branch and tag", with(gitSync(""), func(o *v1.GitSync) { o.Spec.Ref = v1.GitRef{Branch: "main", Tag: "v1"} }), "spec.ref", "exactly one of branch, tag and commit"},
		{"git sync with short commit", with(gitSync(""), func(o *v1.GitSync) { o.Spec.Ref = v1.GitRef{Commit: "abc123"} }), "spec.ref.commit", "should match"},
		{"git sync path escaping the repository", with(gitSync(""), func(o *v1.GitSync) { o.Spec.Path = "clusters/../../etc" }), "spec.path", "must stay inside the repository"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.obj.GetName() == "" {
				tc.obj.SetName(testcluster.Name("invalid"))
			}
			err := c.Create(context.Background(), tc.obj)
			if err == nil {
				_ = c.Delete(context.Background(), tc.obj)
				t.Fatalf("created; want an Invalid error naming %s", tc.field)
			}
			assertInvalid(t, err, tc.field, tc.message)
		})
	}
}

// TestImmutableFields updates fields that must not change after creation.
func TestImmutableFields(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	ctx := context.Background()

	cases := []struct {
		name           string
		obj            client.Object
		mutate         func(client.Object)
		field, message string
	}{
		{"node pool runtime handler", nodePool(testcluster.Name("immutable")),
			func(o client.Object) { o.(*v1.NodePool).Spec.RuntimeHandler = "kata-qemu" }, "spec.runtimeHandler", "runtimeHandler is immutable"},
		{"sandbox owner", sandbox(testcluster.Name("immutable")),
			func(o client.Object) { o.(*v1.Sandbox).Spec.Owner = "mallory@example.com" }, "spec.owner", "owner is immutable"},
		{"sandbox template", sandbox(testcluster.Name("immutable")),
			func(o client.Object) { o.(*v1.Sandbox).Spec.TemplateRef.Name = "other" }, "spec.templateRef", "templateRef is immutable"},
		{"sandbox switching to a warm pool", sandbox(testcluster.Name("immutable")),
			func(o client.Object) {
				o.(*v1.Sandbox).Spec.TemplateRef = nil
				o.(*v1.Sandbox).Spec.WarmPoolRef = &v1.LocalObjectReference{Name: "python"}
			}, "spec", "cannot be added or removed after creation"},
		{"sandbox env", with(sandbox(testcluster.Name("immutable")), func(o *v1.Sandbox) { o.Spec.Env = []v1.EnvVar{{Name: "A", Value: "1"}} }),
			func(o client.Object) { o.(*v1.Sandbox).Spec.Env[0].Value = "2" }, "spec.env", "env is immutable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			create(t, c, tc.obj)
			tc.mutate(tc.obj)
			err := c.Update(ctx, tc.obj)
			if err == nil {
				t.Fatalf("updated; want an Invalid error naming %s", tc.field)
			}
			assertInvalid(t, err, tc.field, tc.message)
		})
	}
}

func assertInvalid(t *testing.T, err error, field, message string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("error is not Invalid: %v", err)
	}
	// The API server prefixes schema errors with the path ("spec.replicas:");
	// CEL rules on the object root cannot carry a path to metadata.name, so
	// their message starts with it instead.
	if !strings.Contains(err.Error(), field+":") && !strings.Contains(err.Error(), "Invalid value: "+field+" ") {
		t.Errorf("error does not name the field %s: %v", field, err)
	}
	if !strings.Contains(err.Error(), message) {
		t.Errorf("error does not say %q: %v", message, err)
	}
}

// with returns obj after mutate changed it, so table rows read as "this
// valid object, except ...".
func with[T client.Object](obj T, mutate func(T)) T {
	mutate(obj)
	return obj
}
