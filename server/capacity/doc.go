// Package capacity is the node's admission of live kernels (docs/capacity.md): one Ledger of the
// kernels this node holds, per tenant. Every kernel a session service claims (a new session's, a
// hibernated one's wake, a rotation's, a checkpoint restore's, an ephemeral run's) is a Lease
// acquired here first and released when the kernel is stopped, so the one fact "which tenant holds
// which live kernel" has one owner. Acquire checks the tenant's live_kernels limit, then takes a
// node slot, hibernating an idle session through the caller's evict function on a full node, else
// queues by fair share between tenants for capacity.queue_seconds; a refusal leaves the ledger as it
// was (as golang.org/x/sync/semaphore's Acquire does).
//
// Files: ledger.go (the Ledger, Acquire, Lease), share.go (fair share: the queue's order and the
// tenants over their share), refuse.go (the 429 capacity answers), evict.go (the eviction order),
// memory.go (the host's memory and the pressure figures), budget.go (the derived defaults),
// metrics.go (its Prometheus metrics, on a registry the caller passes).
//
// It knows nothing of sessions or kernels: it imports the domain package, Prometheus and the
// standard library only.
package capacity
