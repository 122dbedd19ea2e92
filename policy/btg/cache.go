package btg

import (
	"sync"
	"time"
)

// Cache is the server's in-memory view of the active grants, refreshed by
// each Sync, and the uses made since the last one. It is safe for
// concurrent use; Lookup is the read path's only cost (a map lookup).
type Cache struct {
	mu     sync.Mutex
	active map[[3]string]Grant // (sub, tenant, patient) → grant
	uses   map[string][]Use
}

// NewCache returns an empty cache: no grant is active until the first
// Replace.
func NewCache() *Cache {
	return &Cache{active: map[[3]string]Grant{}, uses: map[string][]Use{}}
}

// Replace installs the grants active as of the last Sync.
func (c *Cache) Replace(active []Grant) {
	m := make(map[[3]string]Grant, len(active))
	for _, g := range active {
		k := [3]string{g.Sub, g.Tenant, g.Patient}
		if old, ok := m[k]; !ok || g.Expires.After(old.Expires) {
			m[k] = g
		}
	}
	c.mu.Lock()
	c.active = m
	c.mu.Unlock()
}

// Lookup returns the id of a grant that lets sub read tenant's patient at
// t: an active grant naming that tenant. A grant without a tenant (written
// before grants named their tenant) matches no tenant: it cannot say
// whose patient it names (Grant.Active). The expiry is checked here too,
// so a grant stops working at its expiry even between two Syncs. It is
// the one decision of which grant covers a resource: the server's list,
// read and completion all ask it (server.breakGlass).
func (c *Cache) Lookup(sub, tenant, patient string, t time.Time) (string, bool) {
	c.mu.Lock()
	g, ok := c.active[[3]string{sub, tenant, patient}]
	c.mu.Unlock()
	if !ok || tenant == "" || !g.Active(t) {
		return "", false
	}
	return g.ID, true
}

// Used records an audited access made under grant id.
func (c *Cache) Used(id string, u Use) {
	c.mu.Lock()
	c.uses[id] = append(c.uses[id], u)
	c.mu.Unlock()
}

// TakeUses returns the uses recorded since the last call and forgets them.
func (c *Cache) TakeUses() map[string][]Use {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.uses
	c.uses = map[string][]Use{}
	return u
}

// Return gives uses back after a failed Sync, so none is lost.
func (c *Cache) Return(uses map[string][]Use) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, us := range uses {
		c.uses[id] = append(us, c.uses[id]...)
	}
}
