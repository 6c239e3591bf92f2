"""Ingest: read image folders and archives, caption files and comment dumps into a collection.

Readers (``images``, ``tsv``, ``coco``, ``comments``) turn a source into rows or RowErrors;
``writer`` lands rows in bulk; ``runner`` drives one ImportJob and keeps its progress and report.
"""
