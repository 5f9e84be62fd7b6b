package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// systemMetadataPrefixes mark labels and annotations that admission and the
// controllers write; they are not the configuration's and stay out of
// state.
var systemMetadataPrefixes = []string{v1.GroupVersion.Group + "/", "kubectl.kubernetes.io/"}

// metadataAttribute is labels or annotations: what names them.
func metadataAttribute(what string) schema.MapAttribute {
	return schema.MapAttribute{
		Optional:    true,
		ElementType: types.StringType,
		Description: what + " of the object. Keys under " + strings.Join(systemMetadataPrefixes, " and ") +
			" are the system's: refused at plan, since the reconciler and admission set them.",
		Validators: []validator.Map{noSystemKeys{what: strings.ToLower(strings.TrimSuffix(what, "s"))}},
	}
}

// noSystemKeys refuses labels or annotations under a system prefix at
// plan: applied, they would be overwritten or dropped by the system, the
// state would lose them, and the resource would be replaced on every plan.
type noSystemKeys struct{ what string }

func (v noSystemKeys) Description(context.Context) string {
	return "keys must not start with " + strings.Join(systemMetadataPrefixes, " or ")
}

func (v noSystemKeys) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v noSystemKeys) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for key := range req.ConfigValue.Elements() {
		for _, prefix := range systemMetadataPrefixes {
			if strings.HasPrefix(key, prefix) {
				resp.Diagnostics.AddAttributeError(req.Path.AtMapKey(key), "Reserved "+v.what+" key",
					fmt.Sprintf("%s %q: keys under %s are set by the agentsandbox reconciler and admission, not by configuration, "+
						"so Terraform could not keep it; use a prefix of your own, e.g. %q.", v.what, key, prefix, "example.com/"+strings.TrimPrefix(key, prefix)))
			}
		}
	}
}
