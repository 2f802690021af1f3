package secret

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLint(t *testing.T) {
	type hit struct {
		Kind string
		Text string // the flagged text
	}
	tests := map[string]struct {
		in   string
		want []hit
	}{
		// true positives
		"ngc key":             {"docker login -p nvapi-Zq3xT9_kLm2-Pw8vR4sYb7NcD1eF", []hit{{KindNGCKey, "nvapi-Zq3xT9_kLm2-Pw8vR4sYb7NcD1eF"}}},
		"ngc key assigned":    {"NGC_KEY=nvapi-Zq3xT9_kLm2-Pw8vR4sYb7NcD1eF", []hit{{KindNGCKey, "nvapi-Zq3xT9_kLm2-Pw8vR4sYb7NcD1eF"}}},
		"aws key id":          {"aws configure set aws_access_key_id AKIAIOSFODNN7EXAMPLE", []hit{{KindAWSKeyID, "AKIAIOSFODNN7EXAMPLE"}}},
		"aws session key id":  {"ASIAY34FZKBOKMUTVV7A", []hit{{KindAWSKeyID, "ASIAY34FZKBOKMUTVV7A"}}},
		"hugging face":        {"hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", []hit{{KindHFToken, "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"}}},
		"github classic":      {"git clone https://ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789@github.com/x/y", []hit{{KindGitHubToken, "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"}}},
		"github fine grained": {"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", []hit{{KindGitHubToken, "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"}}},
		"sk key":              {"OPENAI sk-proj-a1B2c3D4e5F6g7H8i9J0kLmN", []hit{{KindSecretKey, "sk-proj-a1B2c3D4e5F6g7H8i9J0kLmN"}}},
		"slack":               {"xoxb-123456789012-abcdefABCDEF", []hit{{KindSlackToken, "xoxb-123456789012-abcdefABCDEF"}}},
		"private key": {
			"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n-----END OPENSSH PRIVATE KEY-----\n",
			[]hit{{KindPrivateKey, "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n-----END OPENSSH PRIVATE KEY-----"}},
		},
		"password assignment":          {"DB_PASSWORD=hunter2 ./train.sh", []hit{{KindAssignment, "hunter2"}}},
		"quoted assignment":            {`export HF_TOKEN="my token"`, []hit{{KindAssignment, `"my token"`}}},
		"flag assignment":              {"tool --api-key=abc123 --epochs=3", []hit{{KindAssignment, "abc123"}}},
		"camel case":                   {"accessToken=zzz999", []hit{{KindAssignment, "zzz999"}}},
		"aws secret assigned":          {"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", []hit{{KindAssignment, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}}},
		"url password":                 {"git clone https://bob:s3cr3tpw@git.example.com/r.git", []hit{{KindURLPassword, "s3cr3tpw"}}},
		"high entropy base64":          {"key: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", []hit{{KindHighEntropy, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}}},
		"high entropy padded":          {"auth " + b64("$oauthtoken:"+ngcKey), []hit{{KindHighEntropy, b64("$oauthtoken:" + ngcKey)}}},
		"high entropy lowercase":       {"token k3j9x0q2m8v7b1n4z6c5l0p9o8i7u6y5t4", []hit{{KindHighEntropy, "k3j9x0q2m8v7b1n4z6c5l0p9o8i7u6y5t4"}}},
		"base64 starting with a slash": {"k=/r1PTHIvxGLk+27sSbc2XLFfBLJO7zq/EP0/29dlgM2SGliRs2t5vwJV", []hit{{KindHighEntropy, "/r1PTHIvxGLk+27sSbc2XLFfBLJO7zq/EP0/29dlgM2SGliRs2t5vwJV"}}},
		"random segment in a path":     {"/home/u/.cache/aZ3kQ9mX7pL2wR8tY4vB6nC1dF5gH0jKs/x", []hit{{KindHighEntropy, "aZ3kQ9mX7pL2wR8tY4vB6nC1dF5gH0jKs"}}},
		"two in one string": {
			"AKIAIOSFODNN7EXAMPLE then nvapi-Zq3xT9_kLm2-Pw8vR4sYb7NcD1eF",
			[]hit{{KindAWSKeyID, "AKIAIOSFODNN7EXAMPLE"}, {KindNGCKey, "nvapi-Zq3xT9_kLm2-Pw8vR4sYb7NcD1eF"}},
		},

		// false-positive guards
		"image digest":         {"nvcr.io/nvidia/tao/tao-toolkit@sha256:4f1d2c3b4a5968778695a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3", nil},
		"digest elsewhere":     {"SHA256:Zq3xT9kLm2Pw8vR4sYb7NcD1eFaB0cD9eF8gH7iJ6kL", nil},
		"git sha":              {"commit 9fceb02d0ae598e95dc970b74767f19372d61af8", nil},
		"sha256 bare":          {"4f1d2c3b4a5968778695a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3", nil},
		"md5":                  {"md5 d41d8cd98f00b204e9800998ecf8427e", nil},
		"uuid":                 {"run 123e4567-e89b-12d3-a456-426614174000 started", nil},
		"uuid upper":           {"123E4567-E89B-12D3-A456-426614174000", nil},
		"long path":            {"/workspace/tao-experiments/data/changenet/LEVIR-CD/train/images/2024", nil},
		"relative path":        {"results/visual_changenet/train/checkpoints/model_epoch_010_step_2000.pth", nil},
		"s3 url":               {"s3://my-bucket/changenet/tf-changenet-sweep-20240101/lr-0.001_backbone-resnet18", nil},
		"https url":            {"https://huggingface.co/nvidia/segformer-b5-finetuned-cityscapes-1024-1024/resolve/main/config.json", nil},
		"identifier":           {"visual_changenet_train_resnet18_lr0001_bs16_epochs200", nil},
		"capitalised words":    {"TrainingExperimentWithCityscapesDataset2024", nil},
		"image ref":            {"nvcr.io/nvidia/tao/tao-toolkit:7.2.0-pyt", nil},
		"normal words":         {"visual_changenet train -e /data/spec.yaml train.lr=0.001 results_dir=/results/a", nil},
		"env reference":        {"NGC_KEY=$NGC_KEY AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY}", nil},
		"expression":           {"HF_TOKEN=${{ vars.token }}", nil},
		"command subst":        {"PASSWORD=$(cat /run/secrets/pw)", nil},
		"placeholder":          {"NGC_KEY=<your-key> TOKEN=... SECRET=***", nil},
		"not a secret name":    {"MAX_TOKENS=512 TOKEN_LIMIT=4096 SECRET_NAME=ngc PASSWORD_FILE=/run/pw AWS_ACCESS_KEY_ID=$ID tokenizer=bert", nil},
		"boolean":              {"USE_TOKEN=true", nil},
		"bare name":            {"$NGC_KEY", nil},
		"url without password": {"https://user@example.com/x git@github.com:org/repo.git", nil},
		"url with variable":    {"https://bob:$PASS@example.com", nil},
		"short sk words":       {"task-runner disk-usage sk-learn", nil},
		"no digits":            {"ThisIsAVeryLongCamelCaseIdentifierWithoutAnyDigits", nil},
		"hf word":              {"hf_transfer hf_hub_download", nil},
		"empty":                {"", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fs := Lint(tc.in)
			var got []hit
			for _, f := range fs {
				got = append(got, hit{f.Kind, tc.in[f.Offset : f.Offset+f.Length]})
				if lit := tc.in[f.Offset : f.Offset+f.Length]; len(lit) > 6 && strings.Contains(f.Message, lit) {
					t.Errorf("message shows the literal: %s", f.Message)
				}
				if !strings.Contains(f.Message, "secrets:") && f.Kind != KindPrivateKey {
					t.Errorf("message gives no advice: %s", f.Message)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Lint(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestLintMessages(t *testing.T) {
	tests := map[string]struct {
		in   string
		want string
	}{
		"ngc":     {"nvapi-Zq3xT9_kLm2-Pw8vR4sYb7NcD1eF", "looks like an NGC API key (nvapi-…); declare it under secrets: and pass it with env:"},
		"aws":     {"AKIAIOSFODNN7EXAMPLE", "looks like an AWS access key id (AKIA…); declare it under secrets: and pass it with env:"},
		"slack":   {"xoxp-123456789012-abc", "looks like a Slack token (xoxp-…); declare it under secrets: and pass it with env:"},
		"assign":  {"HF_TOKEN=abc", "HF_TOKEN is set to a literal value; declare it under secrets: and pass it with env:"},
		"entropy": {"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "looks like a secret (random-looking string wJalrX…); declare it under secrets: and pass it with env:"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fs := Lint(tc.in)
			if len(fs) != 1 {
				t.Fatalf("Lint(%q) = %v, want one finding", tc.in, fs)
			}
			if fs[0].Message != tc.want {
				t.Errorf("message\n got %q\nwant %q", fs[0].Message, tc.want)
			}
		})
	}
}

func FuzzLint(f *testing.F) {
	f.Add("NGC_KEY=nvapi-Zq3xT9_kLm2-Pw8vR4sYb7NcD1eF https://a:b@c/d")
	f.Add("-----BEGIN RSA PRIVATE KEY-----")
	f.Fuzz(func(t *testing.T, s string) {
		last := -1
		for _, fd := range Lint(s) {
			if fd.Offset < 0 || fd.Length <= 0 || fd.Offset+fd.Length > len(s) || fd.Offset < last {
				t.Fatalf("bad finding %+v in %q", fd, s)
			}
			last = fd.Offset
		}
	})
}

// TestLintFlagsGeneratedTokens checks recall on tokens of 32 to 64
// characters drawn the way key generators draw them, with at least one
// digit (Lint requires letters and digits). Mixed-case tokens are always
// flagged; a short lowercase token can fall under 4 bits of entropy.
func TestLintFlagsGeneratedTokens(t *testing.T) {
	tests := map[string]struct {
		alphabet  string
		maxMissed int // of 2000
	}{
		"base62":    {letters + digits, 0},
		"base64":    {letters + digits + "+/", 0},
		"base64url": {letters + digits + "-_", 0},
		"lower36":   {"abcdefghijklmnopqrstuvwxyz" + digits, 20},
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			missed := 0
			for n := 0; n < 2000; {
				b := make([]byte, 32+rng.IntN(33))
				for i := range b {
					b[i] = tc.alphabet[rng.IntN(len(tc.alphabet))]
				}
				tok := string(b)
				if !strings.ContainsAny(tok, digits) {
					continue
				}
				n++
				if fs := Lint("value: " + tok); len(fs) == 0 {
					if missed++; missed <= 3 {
						t.Logf("missed %s (entropy %.2f)", tok, entropy(tok))
					}
				}
			}
			t.Logf("%d of 2000 not flagged", missed)
			if missed > tc.maxMissed {
				t.Errorf("%d of 2000 generated tokens not flagged, want at most %d", missed, tc.maxMissed)
			}
		})
	}
}
