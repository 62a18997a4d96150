package mock_test

import (
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/mock"
	"github.com/carryover/carryover/persistence/storetest"
)

// The fake answers the contract the real backends answer, for all it fakes: a unit test on it
// proves something about the service, not about the fake.
func TestStoreContract(t *testing.T) {
	storetest.RunRecordStoreTests(t, func(t *testing.T) carryover.Store { return mock.NewStore() })
}
