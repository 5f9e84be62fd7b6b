package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

func TestPlaceRewritesPathsUnderNestedArguments(t *testing.T) {
	spec := tftypes.AttributeName("spec")
	cases := []struct {
		name               string
		path, want         *tftypes.AttributePath
		detail, wantDetail string
	}{
		{"first key under spec", tftypes.NewAttributePath().WithAttributeName("spec").WithAttributeName("ttl"),
			tftypes.NewAttributePathWithSteps([]tftypes.AttributePathStep{spec, tftypes.ElementKeyString("ttl")}),
			"Attribute spec.ttl must be a duration", "Attribute spec.ttl must be a duration"},
		{"deep path keeps its first key", tftypes.NewAttributePath().WithAttributeName("spec").WithAttributeName("network").
			WithAttributeName("egress").WithElementKeyInt(0).WithAttributeName("cidr"),
			tftypes.NewAttributePathWithSteps([]tftypes.AttributePathStep{spec, tftypes.ElementKeyString("network")}),
			"Attribute spec.network.egress[0].cidr must be a CIDR", "Attribute spec.network.egress[0].cidr must be a CIDR"},
		{"the argument itself", tftypes.NewAttributePath().WithAttributeName("spec"),
			tftypes.NewAttributePath().WithAttributeName("spec"), "Attribute spec must set one", "Attribute spec must set one"},
		{"a map key of a plain argument", tftypes.NewAttributePath().WithAttributeName("labels").WithElementKeyString("a/b"),
			tftypes.NewAttributePath().WithAttributeName("labels").WithElementKeyString("a/b"), "reserved", "reserved"},
		{"a message without the path gets it", tftypes.NewAttributePath().WithAttributeName("spec").WithAttributeName("ports").
			WithElementKeyInt(1).WithAttributeName("name"),
			tftypes.NewAttributePathWithSteps([]tftypes.AttributePathStep{spec, tftypes.ElementKeyString("ports")}),
			"duplicate", "Attribute spec.ports[1].name: duplicate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &tfprotov6.Diagnostic{Attribute: tc.path, Detail: tc.detail}
			place(map[string]bool{"spec": true}, []*tfprotov6.Diagnostic{d})
			if !d.Attribute.Equal(tc.want) {
				t.Errorf("path %s became %s; want %s", tc.path, d.Attribute, tc.want)
			}
			if d.Detail != tc.wantDetail {
				t.Errorf("detail %q; want %q", d.Detail, tc.wantDetail)
			}
		})
	}
}
