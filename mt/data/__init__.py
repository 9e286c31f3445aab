"""Data: reading parallel text, the sentencepiece tokenizer, encoding, batching and subword sampling."""
