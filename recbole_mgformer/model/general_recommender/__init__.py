"""This project's general models, one module each, named as RecBole names its own: the registry finds them by
module (``recbole_mgformer.integration.registry.model_modules``), so this package re-exports none and importing one
model (a filter that MGFormer's residual uses) imports no other."""
