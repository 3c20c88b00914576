"""Small models built in the tests: transformers models from config dicts
(no weights are downloaded), a timm-like CNN and a diffusers-like UNet block."""

import torch
from torch import nn

#: Small configs of architectures the Rust config path knows; the
#: activation fixtures (tests/fixtures/activations) use the first three.
CONFIGS = {
    "gpt2": dict(model_type="gpt2", n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=256,
                 attn_pdrop=0.0, embd_pdrop=0.0, resid_pdrop=0.0),
    "llama": dict(model_type="llama", hidden_size=64, intermediate_size=176, max_position_embeddings=256,
                  num_attention_heads=4, num_hidden_layers=2, num_key_value_heads=4, vocab_size=1000),
    "qwen2": dict(model_type="qwen2", hidden_size=64, intermediate_size=176, max_position_embeddings=256,
                  num_attention_heads=4, num_hidden_layers=2, num_key_value_heads=2, vocab_size=1000,
                  tie_word_embeddings=True),
    "mistral": dict(model_type="mistral", hidden_size=64, intermediate_size=176, max_position_embeddings=256,
                    num_attention_heads=4, num_hidden_layers=2, num_key_value_heads=2, vocab_size=1000),
    "bert": dict(model_type="bert", hidden_size=64, intermediate_size=128, num_attention_heads=4,
                 num_hidden_layers=2, vocab_size=1000, max_position_embeddings=128),
}


def transformers_model(name, device=None, attn="eager", **overrides):
    import transformers

    raw = dict(CONFIGS[name], **overrides)
    model_type = raw.pop("model_type")
    config = transformers.AutoConfig.for_model(model_type, **raw)
    auto = transformers.AutoModelForMaskedLM if model_type == "bert" else transformers.AutoModelForCausalLM
    torch.manual_seed(0)
    if device is None:
        return auto.from_config(config, attn_implementation=attn).train()
    with torch.device(device):
        return auto.from_config(config, attn_implementation=attn).train()


class ConvBlock(nn.Module):
    """A ResNet basic block as timm writes it: conv-bn-relu twice, a skip."""

    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


class TinyResNet(nn.Module):
    """A timm-like CNN: stem, two stages, pooled classifier."""

    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.stage1 = ConvBlock(16)
        self.down = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.stage2 = ConvBlock(32)
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        x = self.stage2(self.down(self.stage1(self.stem(x))))
        return self.head(x.mean(dim=(2, 3)))


class ResnetBlock(nn.Module):
    """diffusers' ResnetBlock2D, reduced: GroupNorm-SiLU-conv twice with a
    time embedding added between, and a 1x1 skip."""

    def __init__(self, cin, cout, temb):
        super().__init__()
        self.norm1 = nn.GroupNorm(4, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.time_emb_proj = nn.Linear(temb, cout)
        self.norm2 = nn.GroupNorm(4, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.conv_shortcut = nn.Conv2d(cin, cout, 1)

    def forward(self, x, t):
        h = self.conv1(nn.functional.silu(self.norm1(x)))
        h = h + self.time_emb_proj(nn.functional.silu(t))[:, :, None, None]
        h = self.conv2(nn.functional.silu(self.norm2(h)))
        return self.conv_shortcut(x) + h


class AttentionBlock(nn.Module):
    """diffusers' Transformer2DModel, reduced: GroupNorm, tokens, self-attention."""

    def __init__(self, channels, heads=4):
        super().__init__()
        self.norm = nn.GroupNorm(4, channels)
        self.attn = nn.MultiheadAttention(channels, heads, batch_first=True)

    def forward(self, x):
        b, c, h, w = x.shape
        tokens = self.norm(x).flatten(2).transpose(1, 2)
        out, _ = self.attn(tokens, tokens, tokens, need_weights=False)
        return x + out.transpose(1, 2).reshape(b, c, h, w)


class TinyUNetBlock(nn.Module):
    """A diffusers-like UNet: a down block (resnet + attention + downsample),
    a mid resnet, an up block (upsample, concatenated skip, resnet), with a
    timestep embedding."""

    def __init__(self, channels=32, temb=64):
        super().__init__()
        self.time_embedding = nn.Sequential(nn.Linear(16, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.conv_in = nn.Conv2d(4, channels, 3, padding=1)
        self.down = ResnetBlock(channels, channels, temb)
        self.down_attn = AttentionBlock(channels)
        self.downsample = nn.Conv2d(channels, channels, 3, stride=2, padding=1)
        self.mid = ResnetBlock(channels, channels, temb)
        self.up = ResnetBlock(2 * channels, channels, temb)
        self.conv_out = nn.Conv2d(channels, 4, 3, padding=1)

    def forward(self, sample, timestep_features):
        t = self.time_embedding(timestep_features)
        x = self.conv_in(sample)
        skip = self.down_attn(self.down(x, t))
        y = self.mid(self.downsample(skip), t)
        y = nn.functional.interpolate(y, scale_factor=2.0, mode="nearest")
        y = self.up(torch.cat([y, skip], dim=1), t)
        return self.conv_out(y)
