package server

import "testing"

// Golden vectors of research aliases, computed independently (Python's
// hmac and uuid modules): key = bytes 0..31.
func TestResearchAliasGolden(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	for id, want := range map[string]string{
		"7d1a3c52-0b8e-4f57-9a77-2f3d1c9b0a01": "67956e46-6679-80b2-a37e-97bc46958d62",
		"11111111-1111-4111-8111-111111111111": "5601172e-6311-8704-905e-34f744e16709",
	} {
		if got := researchAlias(key, id); got != want {
			t.Errorf("researchAlias(%s) = %s, want %s", id, got, want)
		}
	}
}
