package resources_test

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

func TestAccTemplate(t *testing.T) {
	names := []string{testcluster.Name("tpl"), "", testcluster.Name("tpl")}
	names[1] = names[0]
	images := []string{"ghcr.io/acme/python:3.12", "ghcr.io/acme/python:3.13", "ghcr.io/acme/python:3.13"}
	lifecycle{
		typeName:     "template",
		name:         func(v int) string { return names[v] },
		config:       func(v int) string { return templateHCL("test", names[v], images[v]) },
		changedPath:  tfjsonpath.New("spec").AtMapKey("image"),
		changedValue: knownvalue.StringExact("ghcr.io/acme/python:3.13"),
		drift:        `{"spec":{"image":"docker.io/library/busybox:latest","workingDir":"/tmp"}}`,
		driftField:   []string{"spec", "image"},
		want:         "ghcr.io/acme/python:3.12",
	}.run(t)
}
