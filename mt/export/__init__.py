"""Export to CTranslate2, and translating with an export (no torch needed for that)."""
