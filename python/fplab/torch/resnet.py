"""The CIFAR-style ResNet-18 (He et al. 2016; a 3x3 stem without max-pooling, as in
kuangliu/pytorch-cifar) in plain PyTorch: the model of issue 17's benchmark and of the research
run at scale (experiments/resnet18_fashion_mnist.py). Nothing in it is fplab's: under
fplab.torch.emulate its convolutions, BatchNorms, pooling and loss go through fplab like any
user's model's.

>>> from fplab.torch.resnet import resnet18
>>> model = resnet18(in_channels=1, classes=10)   # Fashion-MNIST's 28x28 grey images
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with BatchNorm, and a 1x1 projection where the shape changes."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet18(nn.Module):
    """Stages of 64, 128, 256 and 512 channels, two BasicBlocks each; global average pooling."""

    def __init__(self, in_channels: int = 1, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False)  # 3x3 stem, no max-pooling
        self.bn1 = nn.BatchNorm2d(64)
        blocks, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layers(x)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def resnet18(in_channels: int = 1, classes: int = 10) -> ResNet18:
    """A ResNet-18 for images of ``in_channels`` channels and ``classes`` classes, PyTorch's default initialisation."""
    return ResNet18(in_channels, classes)
