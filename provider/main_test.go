package provider_test

import (
	"testing"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/acctest"
)

func TestMain(m *testing.M) { acctest.Main(m) }
