"""Offline trainers that read convert's outputs and write a plain Hugging Face model directory."""
