package provider

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// Server returns the constructor of the provider's plugin server: the
// framework's, with the attribute paths of its validation and plan
// diagnostics rewritten so that Terraform and OpenTofu show the line they
// are about (see placeable).
func Server(version string) func() (tfprotov6.ProviderServer, error) {
	return func() (tfprotov6.ProviderServer, error) {
		srv, err := providerserver.NewProtocol6WithError(New(version)())()
		if err != nil {
			return nil, err
		}
		return &placingServer{ProviderServer: srv}, nil
	}
}

// placingServer rewrites diagnostic paths. Terraform and OpenTofu place a
// diagnostic in the configuration by its attribute path, but they walk that
// path through nested blocks only, plus one final index into the
// collection an argument holds (hashicorp/terraform#33491). Every step under
// a nested attribute such as spec is skipped: spec.ttl falls back to the
// `resource "…" {` line, and spec.template_ref.name lands on the resource's
// own name argument, an unrelated line. Sent as spec["ttl"] instead, the
// final-index rule finds the ttl key in the spec object and shows its line;
// a deeper path is sent as its first key under the argument (the
// spec.network line for spec.network.egress[0].cidr), and the message,
// which names the whole path, says the rest.
type placingServer struct {
	tfprotov6.ProviderServer

	once sync.Once
	// The top-level arguments that are nested attributes, whose paths need
	// the rewrite (block paths are placed well as they are), by type name
	// of resource, data source and ephemeral resource: the three share
	// names (agentsandbox_sandbox is all three).
	resources, dataSources, ephemeral nestedArguments
}

// nestedArguments holds by type name the top-level arguments that are
// nested attributes.
type nestedArguments map[string]map[string]bool

func nestedArgumentsOf(schemas map[string]*tfprotov6.Schema) nestedArguments {
	out := nestedArguments{}
	for typeName, schema := range schemas {
		if schema == nil || schema.Block == nil {
			continue
		}
		names := map[string]bool{}
		for _, a := range schema.Block.Attributes {
			if a.NestedType != nil {
				names[a.Name] = true
			}
		}
		out[typeName] = names
	}
	return out
}

// schemas reads the provider's schemas once, on the first diagnostic.
func (s *placingServer) schemas(ctx context.Context) {
	s.once.Do(func() {
		resp, err := s.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
		if err != nil || resp == nil {
			return
		}
		s.resources = nestedArgumentsOf(resp.ResourceSchemas)
		s.dataSources = nestedArgumentsOf(resp.DataSourceSchemas)
		s.ephemeral = nestedArgumentsOf(resp.EphemeralResourceSchemas)
	})
}

func (s *placingServer) ValidateResourceConfig(ctx context.Context, req *tfprotov6.ValidateResourceConfigRequest) (*tfprotov6.ValidateResourceConfigResponse, error) {
	resp, err := s.ProviderServer.ValidateResourceConfig(ctx, req)
	if resp != nil {
		s.schemas(ctx)
		place(s.resources[req.TypeName], resp.Diagnostics)
	}
	return resp, err
}

func (s *placingServer) ValidateDataResourceConfig(ctx context.Context, req *tfprotov6.ValidateDataResourceConfigRequest) (*tfprotov6.ValidateDataResourceConfigResponse, error) {
	resp, err := s.ProviderServer.ValidateDataResourceConfig(ctx, req)
	if resp != nil {
		s.schemas(ctx)
		place(s.dataSources[req.TypeName], resp.Diagnostics)
	}
	return resp, err
}

func (s *placingServer) ValidateEphemeralResourceConfig(ctx context.Context, req *tfprotov6.ValidateEphemeralResourceConfigRequest) (*tfprotov6.ValidateEphemeralResourceConfigResponse, error) {
	resp, err := s.ProviderServer.ValidateEphemeralResourceConfig(ctx, req)
	if resp != nil {
		s.schemas(ctx)
		place(s.ephemeral[req.TypeName], resp.Diagnostics)
	}
	return resp, err
}

func (s *placingServer) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	resp, err := s.ProviderServer.PlanResourceChange(ctx, req)
	if resp != nil {
		s.schemas(ctx)
		place(s.resources[req.TypeName], resp.Diagnostics)
	}
	return resp, err
}

// place rewrites the paths of diags that lie under one of the nested
// arguments.
func place(nested map[string]bool, diags []*tfprotov6.Diagnostic) {
	for _, d := range diags {
		if d.Attribute == nil {
			continue
		}
		steps := d.Attribute.Steps()
		if len(steps) < 2 {
			continue
		}
		first, ok := steps[0].(tftypes.AttributeName)
		if !ok || !nested[string(first)] {
			continue
		}
		placed, ok := placeable(steps)
		if !ok {
			continue
		}
		if full := pathString(steps); !strings.Contains(d.Detail, full) {
			d.Detail = "Attribute " + full + ": " + d.Detail
		}
		d.Attribute = tftypes.NewAttributePathWithSteps(placed)
	}
}

// placeable is the path Terraform places on the right line for a path under
// a nested attribute: the argument and the first key or index under it.
// ok is false when steps is that already.
func placeable(steps []tftypes.AttributePathStep) (placed []tftypes.AttributePathStep, ok bool) {
	if len(steps) < 2 {
		return nil, false
	}
	second := steps[1]
	if name, isName := second.(tftypes.AttributeName); isName {
		second = tftypes.ElementKeyString(name)
	} else if len(steps) == 2 {
		return nil, false
	}
	return []tftypes.AttributePathStep{steps[0], second}, true
}

// pathString writes steps as the framework's messages do:
// spec.network.egress[0].cidr, labels["team"].
func pathString(steps []tftypes.AttributePathStep) string {
	var b strings.Builder
	for i, step := range steps {
		switch step := step.(type) {
		case tftypes.AttributeName:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(string(step))
		case tftypes.ElementKeyString:
			fmt.Fprintf(&b, "[%q]", string(step))
		case tftypes.ElementKeyInt:
			fmt.Fprintf(&b, "[%d]", int64(step))
		default:
			b.WriteString("[…]")
		}
	}
	return b.String()
}
