package crdschema

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// combination is a rule about which attributes of one object may be set
// together.
type combination struct {
	Kind combinationKind
	// Attrs are attribute names of the object the rule is on.
	Attrs []string
}

// combinationKind says how many of a combination's attributes may be set.
type combinationKind int

// combination kinds.
const (
	exactlyOne combinationKind = iota
	atLeastOne
	atMostOne
)

// ruleTranslation recognises one CEL rule of the CRDs and applies its
// Terraform equivalent to the field it is declared on. A CEL rule nothing
// here recognises fails schema construction, and so the unit tests: every
// constraint of the CRD is checked at plan time, or the build says which is
// not.
type ruleTranslation struct {
	rule  *regexp.Regexp
	apply func(f *Field, m []string) error
}

var (
	hasSelf      = regexp.MustCompile(`has\(self\.(\w+)\)`)
	quotedString = regexp.MustCompile(`'([^']*)'`)
)

var ruleTranslations = []ruleTranslation{
	{regexp.MustCompile(`^self == oldSelf$`), func(f *Field, _ []string) error {
		f.Immutable = true
		return nil
	}},
	{regexp.MustCompile(`^isCIDR\(self\)$`), func(f *Field, _ []string) error {
		f.StringValidators = append(f.StringValidators, cidrValidator)
		return nil
	}},
	{regexp.MustCompile(`^quantity\(self\)\.isGreaterThan\(quantity\('0'\)\)$`), func(f *Field, _ []string) error {
		f.StringValidators = append(f.StringValidators, positiveQuantityValidator)
		return nil
	}},
	{regexp.MustCompile(`^!self\.split\('/'\)\.exists\(p, p == '\.\.'\)$`), func(f *Field, _ []string) error {
		f.StringValidators = append(f.StringValidators, noParentSegmentValidator)
		return nil
	}},
	{regexp.MustCompile(`^self\.all\(k, k in \[(.*)\]\)$`), func(f *Field, m []string) error {
		var keys []string
		for _, q := range quotedString.FindAllStringSubmatch(m[1], -1) {
			keys = append(keys, q[1])
		}
		f.MapValidators = append(f.MapValidators, mapvalidator.KeysAre(stringvalidator.OneOf(keys...)))
		return nil
	}},
	{regexp.MustCompile(`^!has\(self\.(\w+)\) \|\| self\.(\w+) >= self\.(\w+)$`), func(f *Field, m []string) error {
		return addObjectCheck(f, notLower, m[2], m[3])
	}},
	{regexp.MustCompile(`^self\.(\w+) \|\| !has\(self\.(\w+)\)$`), func(f *Field, m []string) error {
		return addObjectCheck(f, needsTrue, m[2], m[1])
	}},
	{regexp.MustCompile(`^!has\(self\.(\w+)\) \|\| !has\(self\.(\w+)\) \|\| self\.\w+\.all\(k, !\(k in self\.\w+\) \|\| ` +
		`quantity\(self\.\w+\[k\]\)\.compareTo\(quantity\(self\.\w+\[k\]\)\) <= 0\)$`), func(f *Field, m []string) error {
		return addObjectCheck(f, quantitiesNotAbove, m[1], m[2])
	}},
	{regexp.MustCompile(`^has\(self\.\w+\) \|\| has\(self\.\w+\)$`), combinationOf(atLeastOne)},
	{regexp.MustCompile(`^has\(self\.\w+\) != has\(self\.\w+\)$`), combinationOf(exactlyOne)},
	{regexp.MustCompile(`^\[(has\(self\.\w+\)(, )?)+\]\.filter\(x, x\)\.size\(\) == 1$`), combinationOf(exactlyOne)},
	{regexp.MustCompile(`^!\(has\(self\.\w+\) && has\(self\.\w+\)\)$`), combinationOf(atMostOne)},
	{regexp.MustCompile(`^!has\(self\.(\w+)\) \|\| self\.(\w+)\.all\(c, c\.size\(\) > 0\)$`), func(f *Field, m []string) error {
		list := f.childByJSON(m[1])
		if list == nil || list.Type != List || list.Elem.Type != String {
			return fmt.Errorf("rule on %s: not a list of strings", m[1])
		}
		list.ListValidators = append(list.ListValidators, listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1)))
		return nil
	}},
	// "cannot be added or removed": Terraform already replaces the object
	// when either attribute changes, as long as both are immutable.
	{regexp.MustCompile(`^has\(self\.\w+\) == has\(oldSelf\.\w+\)( && has\(self\.\w+\) == has\(oldSelf\.\w+\))*$`), func(f *Field, m []string) error {
		for _, h := range hasSelf.FindAllStringSubmatch(m[0], -1) {
			if c := f.childByJSON(h[1]); c == nil || !c.Immutable {
				return fmt.Errorf("rule %q: %s is not immutable", m[0], h[1])
			}
		}
		return nil
	}},
}

// combinationOf records the attributes a has() rule names.
func combinationOf(kind combinationKind) func(*Field, []string) error {
	return func(f *Field, m []string) error {
		c := combination{Kind: kind}
		for _, h := range hasSelf.FindAllStringSubmatch(m[0], -1) {
			child := f.childByJSON(h[1])
			if child == nil {
				return fmt.Errorf("rule %q names unknown field %s", m[0], h[1])
			}
			c.Attrs = append(c.Attrs, child.Name)
		}
		f.ObjectValidators = append(f.ObjectValidators, combinationValidator(c))
		return nil
	}
}

func addRule(f *Field, rule apiextensionsv1.ValidationRule) error {
	for _, t := range ruleTranslations {
		if m := t.rule.FindStringSubmatch(rule.Rule); m != nil {
			return t.apply(f, m)
		}
	}
	return fmt.Errorf("no plan-time check for the CEL rule %q: add one to crdschema's ruleTranslations", rule.Rule)
}

func (f *Field) childByJSON(jsonName string) *Field {
	for _, c := range f.Fields {
		if c.JSON == jsonName {
			return c
		}
	}
	return nil
}

// metadataNameRule is the rule every kind puts on metadata.name.
var metadataNameRule = regexp.MustCompile(`^self\.metadata\.name\.matches\('([^']+)'\) && self\.metadata\.name\.size\(\) <= (\d+)$`)

// nameLimit reads the pattern and the length limit of metadata.name from
// the root rule, and the reason for the limit from its message ("…: the
// sandbox's namespace is named sandbox-<name>").
func nameLimit(rules apiextensionsv1.ValidationRules) (pattern string, maxLength int, reason string, err error) {
	found := false
	for _, r := range rules {
		m := metadataNameRule.FindStringSubmatch(strings.TrimSpace(r.Rule))
		if m == nil {
			// Every root rule must be checked at plan time; this one is not.
			return "", 0, "", fmt.Errorf("no plan-time check for the root CEL rule %q", r.Rule)
		}
		if _, err := fmt.Sscan(m[2], &maxLength); err != nil {
			return "", 0, "", fmt.Errorf("root CEL rule %q: length limit: %w", r.Rule, err)
		}
		pattern, found = m[1], true
		if _, after, ok := strings.Cut(r.Message, ": "); ok {
			reason = after
		}
	}
	if !found {
		return "", 0, "", fmt.Errorf("no rule on metadata.name")
	}
	return pattern, maxLength, reason, nil
}
