package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// objectConflictsWith refuses a nested object set together with any of the
// named root attributes. (objectvalidator.ConflictsWith resolves its paths
// relative to the object, which cannot name a sibling at the root.)
func objectConflictsWith(attrs ...string) validator.Object {
	return conflictsWithRoot{attrs: attrs}
}

type conflictsWithRoot struct{ attrs []string }

func (v conflictsWithRoot) Description(context.Context) string {
	return fmt.Sprintf("cannot be set together with %s", strings.Join(v.attrs, " or "))
}

func (v conflictsWithRoot) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v conflictsWithRoot) ValidateObject(ctx context.Context, req validator.ObjectRequest, resp *validator.ObjectResponse) {
	if req.ConfigValue.IsNull() {
		return
	}
	for _, a := range v.attrs {
		if set(ctx, req.Config, a) {
			resp.Diagnostics.AddAttributeError(req.Path, "Conflicting Provider Settings",
				fmt.Sprintf("%s cannot be set together with %s: the credential plugin supplies the credentials.", req.Path, a))
		}
	}
}

func set(ctx context.Context, cfg tfsdk.Config, attr string) bool {
	var v types.String
	cfg.GetAttribute(ctx, path.Root(attr), &v)
	return !v.IsNull()
}
