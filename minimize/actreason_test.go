package minimize

import "testing"

func TestIsActReasonCode(t *testing.T) {
	for _, c := range []string{"HOPERAT", "PATRQT", "HSYSADMIN", "TREAT", "ETREAT", "HPAYMT", "HRESCH", "HLEGAL", "PUBHLTH"} {
		if !IsActReasonCode(c) {
			t.Errorf("%s is an ActReason code", c)
		}
	}
	for _, c := range []string{"", "HOPRAT", "hoperat", "AUDIT", "_ActInformationPrivacyReason", "TREAT "} {
		if IsActReasonCode(c) {
			t.Errorf("%q is not a purpose a caller can state", c)
		}
	}
}
