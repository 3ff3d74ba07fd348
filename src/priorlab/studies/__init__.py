"""The papers' studies: one subpackage per paper, named after its study stage and report folder
(``fmvae_experiments`` 001, ``vsc_experiments`` 002, ``sparse_vae_experiments`` 003,
``isa_experiments`` 004, ``mssc_experiments`` 000).

Shared by every study: :mod:`.claims` (a claim as a statistical object and its verdict rule),
:mod:`.criteria` (every criterion and its history, the one reviewed place), :mod:`.intervals` (the
95 % intervals) and :mod:`.runs` (reading the pipeline's trained and evaluated runs).
"""
