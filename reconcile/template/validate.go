package template

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/netip"

	"github.com/distribution/reference"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/problem"
)

// validateSpec checks what the CRD schema cannot: that the image reference
// parses as the container runtime will parse it, that every egress exception
// lies inside its rule's CIDR (the NetworkPolicy API refuses it otherwise, and
// a sandbox would fail at its first start), and that port names are unique.
func validateSpec(spec v1.SandboxTemplateSpec) *problem.Problem {
	if _, err := reference.ParseNormalizedNamed(spec.Image); err != nil {
		return problem.Stall(v1.ReasonInvalidImage, "spec.image %q is not a valid image reference: %v", spec.Image, err)
	}
	for i, rule := range spec.Network.Egress {
		if rule.CIDR == "" {
			continue // a hosts or service rule, which the CRD's schema checks
		}
		cidr, err := netip.ParsePrefix(rule.CIDR)
		if err != nil {
			return problem.Stall(v1.ReasonInvalidEgress, "spec.network.egress[%d].cidr %q: %v", i, rule.CIDR, err)
		}
		if cidr.Masked() != cidr {
			return problem.Stall(v1.ReasonInvalidEgress, "spec.network.egress[%d].cidr %q has host bits set; did you mean %s?", i, rule.CIDR, cidr.Masked())
		}
		for j, except := range rule.Except {
			ex, err := netip.ParsePrefix(except)
			if err != nil || ex.Bits() < cidr.Bits() || !cidr.Contains(ex.Addr()) {
				return problem.Stall(v1.ReasonInvalidEgress, "spec.network.egress[%d].except[%d] %q must be a CIDR inside %s", i, j, except, rule.CIDR)
			}
		}
	}
	names := map[string]int{}
	for i, p := range spec.Ports {
		if p.Name == "" {
			continue
		}
		if j, dup := names[p.Name]; dup {
			return problem.Stall(v1.ReasonDuplicatePortName, "spec.ports[%d].name %q is already used by spec.ports[%d]", i, p.Name, j)
		}
		names[p.Name] = i
	}
	return nil
}

// contentHash is a short, stable hash of everything that shapes a running
// sandbox. Lifecycle is left out: changing a default lifetime must not roll
// a warm pool.
func contentHash(spec v1.SandboxTemplateSpec) (string, error) {
	spec.Lifecycle = nil
	data, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8]), nil
}
