"""Captioning models (seeds 000, 002, 004): vocabulary, a small CNN image encoder, a Show-and-Tell
LSTM decoder and a Transformer decoder, beam search, the fluency-guided training strategies, the
evaluation metrics (pycocoevalcap + diversity) and the release -> tensors loader. The trainers that
drive them live in modeling/trainers/captioner.py."""
