"""`mt export`: a checkpoint as a model directory another runtime loads, translating as mt does: the
directory and what both formats share (directory), CTranslate2 (ctranslate2), Hugging Face
transformers (huggingface), the weights' names (mapping) and the model card (model_card)."""
