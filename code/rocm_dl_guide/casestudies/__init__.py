"""The training chapter's case studies, one module per model (MNIST,
CIFAR-10, Fashion-MNIST, IMDB; Inception v3 in three: the pretrained model
``inception_pretrained``, its tiny-imagenet-200 data ``tiny_imagenet`` and the
fine-tuning ``inception``) and the recipe table. They use the core and the
training loop; the registry that names them is
:mod:`rocm_dl_guide.core.casestudies`."""
