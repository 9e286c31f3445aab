"""mt-serve: a trained model behind an HTTP API (POST /translate, GET /health) and a web page (GET /).

Requests that arrive together are decoded together (batcher.py), so a server under load batches as
`translate` does. Nothing here imports torch: a server for an export directory runs on CTranslate2 alone.
"""
